package drift

import "time"

const (
	// phaseTarget is the window width (beyond read durations) at which the pass
	// moment counts as known: reads then need only bracket each pass.
	phaseTarget = 2 * time.Second
	// phaseMinGap keeps Next from reading back to back when candidates pile up.
	phaseMinGap = 200 * time.Millisecond
)

// PhaseTracker infers the moment of slurmctld's decay passes from successive
// reads of what it reports. RawUsage changes only at passes, so two reads with
// different usage bracket one; intersecting brackets modulo the period narrows
// down the phase even when the state file is unreadable.
type PhaseTracker struct {
	Period time.Duration // PriorityCalcPeriod (> 0)
	// Confirm is how many brackets must agree with a window's first
	// before the phase counts as known: one bracket alone may be a change
	// outside a pass (serve, reading for hours, waits for 1; check, which
	// reads a second apart across one pass and exits, takes 0).
	Confirm int

	prev      phaseRead
	haveRead  bool
	avgDur    time.Duration // typical read duration: the floor on how narrow a window can get
	lo, hi    time.Time     // one occurrence of the window holding a pass
	valid     bool
	conflicts int // consecutive brackets that fit no occurrence of the window
	// agreed counts brackets that fitted the window since it was made
	agreed int
}

type phaseRead struct {
	start, end time.Time
	usage      uint64
}

// Observe records a read that started at start, ended at end, and whose
// RawUsage values hash to usage (any fingerprint: equal usage, equal value).
// Reads must come in time order.
func (p *PhaseTracker) Observe(start, end time.Time, usage uint64) {
	cur := phaseRead{start, end, usage}
	dur := end.Sub(start)
	if !p.haveRead {
		p.avgDur = dur
	} else {
		p.avgDur += (dur - p.avgDur) / 8
	}
	prev, had := p.prev, p.haveRead
	p.prev, p.haveRead = cur, true
	// Equal usage is no evidence: a pass may change usage by less than the
	// fingerprint resolves, or not at all on an idle cluster. A bracket longer
	// than a period may hold a pass at any phase.
	if !had || prev.usage == usage || end.Sub(prev.start) > p.Period {
		return
	}
	p.bracket(prev.start, end)
}

// bracket folds in that a pass happened in (a, b].
func (p *PhaseTracker) bracket(a, b time.Time) {
	if !p.valid {
		p.lo, p.hi, p.valid, p.agreed = a, b, true, 0
		return
	}
	k := phaseRound(phaseMid(a, b).Sub(phaseMid(p.lo, p.hi)), p.Period)
	var lo, hi time.Time
	found := false
	// When window and bracket are both wide, two shifts may overlap; their hull
	// is looser than the union but keeps the window a single interval.
	for j := k - 1; j <= k+1; j++ {
		l, h := phaseLater(a, p.lo.Add(j*p.Period)), phaseEarlier(b, p.hi.Add(j*p.Period))
		if h.Before(l) {
			continue
		}
		if !found {
			lo, found = l, true
		}
		hi = h
	}
	if found {
		// Kept at the bracket's occurrence so that shifts stay small.
		p.lo, p.hi, p.conflicts = lo, hi, 0
		p.agreed++
		return
	}
	// One conflict is likely a change outside a pass (a job end charged under
	// AccountingStorageEnforce=limits, an admin reset); two in a row mean the
	// phase moved (slurmctld restarted).
	p.conflicts++
	if p.conflicts >= 2 {
		p.lo, p.hi, p.conflicts, p.agreed = a, b, 0, 0
	}
}

// Pass returns the latest pass moment at or before t as far as known: the
// middle of the window the pass lies in, and the half-width of that window (the
// uncertainty). ok is false while nothing pins it, until Confirm more
// brackets agree with the first, and while a bracket
// that fits no occurrence of the window leaves the phase in doubt (a
// restart moves it: usage is then judged against the whole period until
// the new phase is found).
func (p *PhaseTracker) Pass(t time.Time) (pass time.Time, uncertainty time.Duration, ok bool) {
	if !p.valid || p.conflicts > 0 || p.agreed < p.Confirm {
		return time.Time{}, 0, false
	}
	m := phaseMid(p.lo, p.hi)
	return m.Add(phaseFloor(t.Sub(m), p.Period) * p.Period), p.hi.Sub(m), true
}

// Seed starts the tracker from a phase known before its reads: a pass at
// pass, give or take uncertainty, of the same boot and period (serve keeps
// it across its restarts). Later brackets narrow it, or, if they do not
// fit it, replace it as they would a window of the tracker's own.
func (p *PhaseTracker) Seed(pass time.Time, uncertainty time.Duration) {
	p.lo, p.hi, p.valid, p.conflicts, p.agreed = pass.Add(-uncertainty), pass.Add(uncertainty), true, 0, p.Confirm
}

// Pinned reports whether the window is narrower than phaseTarget plus twice the
// typical read duration, which no bracket can beat by much.
func (p *PhaseTracker) Pinned() bool {
	return p.valid && p.hi.Sub(p.lo) < phaseTarget+2*p.avgDur
}

// Next is when to read next, given the last read's start and end and the
// regular interval. It is never earlier than lastEnd + phaseMinGap. Without a
// window it reads fast to catch a first bracket; with a wide one it aims reads
// at the window's edges and middle so each pass halves it; once pinned it reads
// just before each pass (to check the phase holds) and just after (to report
// fresh usage), else at the regular interval.
func (p *PhaseTracker) Next(lastStart, lastEnd time.Time, interval time.Duration) time.Time {
	earliest := lastEnd.Add(phaseMinGap)
	fast := min(max(p.Period/10, time.Second), 30*time.Second)
	limit := lastStart.Add(min(interval, fast))
	if !p.valid {
		return phaseLater(limit, earliest)
	}
	pinned := p.Pinned()
	if pinned {
		limit = lastStart.Add(interval)
	}
	// The guard keeps a read's whole span (of about the last one's length) off
	// the window's edge by more than the second a caller adds to the window
	// (passes fall on whole seconds, and take a moment to show): a read
	// closer to it could show either side of the pass.
	guard := 1500*time.Millisecond + lastEnd.Sub(lastStart)
	best := limit
	k := phaseFloor(lastEnd.Sub(p.hi), p.Period) + 1 // first occurrence ending after lastEnd
	for j := k - 1; j <= k+1; j++ {
		lo, hi := p.lo.Add(j*p.Period), p.hi.Add(j*p.Period)
		cands := []time.Time{lo.Add(-guard), hi.Add(guard)}
		if !pinned {
			cands = append(cands, phaseMid(lo, hi))
		}
		for _, c := range cands {
			if !c.Before(earliest) && c.Before(best) {
				best = c
			}
		}
	}
	return phaseLater(best, earliest)
}

func phaseMid(a, b time.Time) time.Time { return a.Add(b.Sub(a) / 2) }

func phaseLater(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func phaseEarlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// phaseFloor is ⌊d/p⌋; integer so that far-apart times keep nanosecond precision.
func phaseFloor(d, p time.Duration) time.Duration {
	q := d / p
	if d%p < 0 {
		q--
	}
	return q
}

func phaseRound(d, p time.Duration) time.Duration { return phaseFloor(d+p/2, p) }
