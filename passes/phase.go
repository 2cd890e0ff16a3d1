// Package passes is slurmctld's decay passes as its reports show them:
// whether one fell between two reads (Between) and where they fall
// (PhaseTracker, BootPhase), inferred from successive reads when the
// state file is unreadable. drift compares values; when the values were
// computed is this package's question.
package passes

import (
	"fmt"
	"time"
)

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

	prev     phaseRead
	haveRead bool
	// before are the starts of the two reads before prev: a read comes at
	// least a period after the first of them, three a period at most
	before    [2]time.Time
	avgDur    time.Duration // typical read duration: the floor on how narrow a window can get
	lo, hi    time.Time     // one occurrence of the window holding a pass
	valid     bool
	conflicts int // consecutive brackets that fit no occurrence of the window
	// agreed counts brackets that fitted the window since it was made
	agreed int
	// prior: the window came from slurmctld's boot (SeedBoot), not from
	// reads, and counts as known only once a bracket agrees with it
	prior bool
	// confirmed is the end of the last narrow bracket that agreed with the
	// window: once pinned, reads confirm the phase once every
	// confirmEvery periods (Next)
	confirmed time.Time
	// doubted: the last read contradicted the window (a bracket that fits
	// none of its occurrences, or no pass seen across one)
	doubted bool
	// first is the first read's start, changed the end of the last read
	// whose usage differed from the one before: passes that change
	// nothing (an idle cluster) leave nothing to infer (quiet)
	first, changed time.Time
	// belief is a window kept from before the reads (Seed): where a pass
	// fell, as an earlier run's reads pinned it. It is not the tracker's
	// window until a bracket confirms it, and the first bracket that fits
	// none of its occurrences drops it (dropped says why, until Dropped):
	// a file that still parses may say anything.
	belief   [2]time.Time
	believed bool
	dropped  string
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
	if had {
		p.before = [2]time.Time{p.before[1], prev.start}
	} else {
		p.first = start
	}
	if had && prev.usage != usage {
		p.changed = end
	}
	p.prev, p.haveRead, p.doubted = cur, true, false
	if !had || end.Sub(prev.start) > p.Period {
		return // a bracket longer than a period may hold a pass at any phase
	}
	if prev.usage == usage {
		// Equal usage is no evidence of where the pass is: a pass may
		// change usage by less than the fingerprint resolves, or not at
		// all on an idle cluster. But two reads just either side of the
		// window that see none put it in doubt, as a conflicting bracket
		// does (a restart moved the phase; the caller may ask
		// slurmctld's boot), without a bracket to replace it with.
		if p.valid && p.spans(prev.end, start) && !p.changed.IsZero() && !p.quiet(start) {
			if p.prior {
				// No pass across the boot's window: slurmctld loaded its
				// priority plugin later (22.05 with 10,000 associations
				// passed at boot+6 s beside another real-Slurm test).
				// Its passes cannot fall before the boot's: the rest of
				// the period after this read holds them. Not a doubt:
				// the boot is right.
				k := phaseFloor(start.Sub(p.lo), p.Period)
				p.lo, p.hi, p.prior, p.agreed, p.conflicts = start, p.lo.Add((k+1)*p.Period), false, 0, 0
				return
			}
			p.doubted = true
			if p.conflicts++; p.conflicts >= 2 {
				p.valid, p.conflicts = false, 0
			}
		}
		return
	}
	if !p.judgeBelief(prev.start, end) {
		p.bracket(prev.start, end, prev.end.Equal(p.confirmed))
	}
}

// judgeBelief weighs the belief (Seed) against a pass in (a, b]: a narrow
// bracket that overlaps one of its occurrences confirms it, and the
// window becomes their intersection, known at once (adopted); a bracket
// that overlaps none drops it; a wide one that overlaps it says nothing.
func (p *PhaseTracker) judgeBelief(a, b time.Time) (adopted bool) {
	if !p.believed {
		return false
	}
	lo, hi := p.belief[0], p.belief[1]
	k := phaseRound(phaseMid(a, b).Sub(phaseMid(lo, hi)), p.Period)
	for j := k - 1; j <= k+1; j++ {
		l, h := phaseLater(a, lo.Add(j*p.Period)), phaseEarlier(b, hi.Add(j*p.Period))
		if h.Before(l) {
			continue
		}
		if b.Sub(a) >= p.Period/2 {
			return false
		}
		p.lo, p.hi, p.valid, p.conflicts, p.prior, p.believed = l, h, true, 0, false, false
		p.agreed, p.confirmed = max(p.agreed, p.Confirm), b
		return true
	}
	p.believed = false
	p.dropped = fmt.Sprintf("a pass between reads at %s and %s, outside every period's window %s to %s",
		a.UTC().Format(time.RFC3339Nano), b.UTC().Format(time.RFC3339Nano), lo.UTC().Format(time.RFC3339Nano), hi.UTC().Format(time.RFC3339Nano))
	return false
}

// Dropped says what contradicted the belief Seed gave, once, when a
// bracket dropped it ("" otherwise).
func (p *PhaseTracker) Dropped() string {
	why := p.dropped
	p.dropped = ""
	return why
}

// spans reports whether (a, b), less than half a period long, holds a
// whole occurrence of the window.
func (p *PhaseTracker) spans(a, b time.Time) bool {
	if b.Sub(a) >= p.Period/2 {
		return false
	}
	k := phaseFloor(b.Sub(p.hi), p.Period)
	return p.lo.Add(k * p.Period).After(a)
}

// quiet: no read has shown a change for two periods up to t (nor since
// the first read, two periods ago): passes go unseen, so reading more
// would find nothing. A read across a pass that sees none is evidence
// only where reads have seen passes, lately.
func (p *PhaseTracker) quiet(t time.Time) bool {
	since := p.changed
	if since.IsZero() {
		since = p.first
	}
	return t.Sub(since) >= 2*p.Period
}

// Doubted reports whether the last read contradicted the phase: a pass
// outside the window, or none across it. A restart of slurmctld moves the
// phase; so, rarely, does a change outside a pass.
func (p *PhaseTracker) Doubted() bool { return p.doubted }

// bracket folds in that a pass happened in (a, b]. sawLast: the read that
// opened it closed the last agreeing bracket, so the pass it saw, in the
// occurrence ending by then, is not this one.
func (p *PhaseTracker) bracket(a, b time.Time, sawLast bool) {
	if !p.valid {
		p.lo, p.hi, p.valid, p.agreed, p.prior = a, b, true, 0, false
		return
	}
	k := phaseRound(phaseMid(a, b).Sub(phaseMid(p.lo, p.hi)), p.Period)
	var lo, hi time.Time
	found := 0
	// When window and bracket are both wide, two shifts may overlap; their hull
	// is looser than the union but keeps the window a single interval.
	for j := k - 1; j <= k+1; j++ {
		l, h := phaseLater(a, p.lo.Add(j*p.Period)), phaseEarlier(b, p.hi.Add(j*p.Period))
		if h.Before(l) || sawLast && !h.After(p.confirmed) {
			continue
		}
		if found == 0 {
			lo = l
		}
		hi, found = h, found+1
	}
	if found > 1 && hi.Sub(lo) >= p.hi.Sub(p.lo) {
		return // a bracket across two occurrences that narrows nothing says nothing
	}
	if found == 1 && p.prior && b.Sub(a) < p.Period/2 {
		// The boot's window is a belief, the bracket evidence: slurmctld
		// passed at boot+3 s with 10,000 associations (TestReadBudget), a
		// second past the window, and the bracket around it agreed. So
		// the window becomes the bracket, cut only where the boot proves
		// it: no pass before the boot's occurrence. Known at once; the
		// next passes narrow it.
		p.lo, p.hi = phaseLater(a, lo), b
		p.conflicts, p.prior, p.agreed, p.confirmed = 0, false, p.agreed+1, b
		return
	}
	if found > 0 {
		// Kept at the bracket's occurrence so that shifts stay small.
		p.lo, p.hi, p.conflicts = lo, hi, 0
		// it agrees when it overlaps one occurrence; a bracket wider
		// than the window's gap overlaps any window, so the boot's
		// counts as known only on a close one
		if narrow := b.Sub(a) < p.Period/2; found == 1 && (narrow || !p.prior) {
			p.agreed++
		}
		if b.Sub(a) < p.Period/2 {
			p.confirmed = b
		}
		return
	}
	// One conflict is likely a change outside a pass (a job end charged under
	// AccountingStorageEnforce=limits, an admin reset); two in a row mean the
	// phase moved (slurmctld restarted).
	p.conflicts++
	p.doubted = true
	if p.conflicts >= 2 {
		p.lo, p.hi, p.conflicts, p.agreed, p.prior = a, b, 0, 0, false
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
	if !p.known() {
		return time.Time{}, 0, false
	}
	m := phaseMid(p.lo, p.hi)
	return m.Add(phaseFloor(t.Sub(m), p.Period) * p.Period), p.hi.Sub(m), true
}

// Seed gives the tracker a phase believed before its reads: a pass at
// pass, give or take uncertainty, of the same boot and period (serve keeps
// it across its restarts). A belief is not evidence: a saved file edited
// or copied from elsewhere still parses. Until a bracket confirms it,
// Pass says what the reads alone say (judging a healthy cluster against
// a wrong phase flags it); the first bracket that contradicts it drops it
// (Dropped).
func (p *PhaseTracker) Seed(pass time.Time, uncertainty time.Duration) {
	p.belief, p.believed, p.dropped = [2]time.Time{pass.Add(-uncertainty), pass.Add(uncertainty)}, true, ""
}

// BootPhase is where slurmctld's passes fall after its boot, the window
// SeedBoot starts from. Its decay thread starts as the priority plugin
// loads, just after the boot, runs its first pass at once and the next
// ones at absolute deadlines a period apart (_decay_thread,
// priority_multifactor.c), each stamped with the whole second it woke
// in: on the recordings of 22.05, 24.11 and 26.05
// (testdata/recordings, TestBootPhase) every pass fell 0 or 1 s after
// the boot modulo the period: a pass within 2 s of the boot, both
// stamped in whole seconds.
const BootPhase = 2 * time.Second

// SeedBoot starts the tracker from slurmctld's boot: its passes fall
// within BootPhase of boot modulo the period. It counts as known once a
// bracket agrees (Pass), so that a slow start (a large tree loaded before
// the plugin) costs reads, not a wrong phase.
func (p *PhaseTracker) SeedBoot(boot time.Time) {
	p.lo, p.hi, p.valid, p.conflicts, p.agreed, p.prior = boot, boot.Add(BootPhase), true, 0, 0, true
}

// known: the window holds the phase, as far as the reads tell.
func (p *PhaseTracker) known() bool {
	need := p.Confirm
	if p.prior {
		need = max(need, 1)
	}
	return p.valid && p.conflicts == 0 && p.agreed >= need
}

// Pinned reports whether the window is narrower than phaseTarget plus twice the
// typical read duration, which no bracket can beat by much.
func (p *PhaseTracker) Pinned() bool {
	return p.valid && p.hi.Sub(p.lo) < phaseTarget+2*p.avgDur
}

// Next is when to read next, given the last read's start and end and the
// regular interval; never earlier than lastEnd + phaseMinGap, and at most
// three reads a period while the phase is unknown (each read of
// sshare costs slurmctld an RPC and the host seconds of CPU at 10k
// associations). Without a window it reads every third of a period to
// catch a first bracket; with a wide one it reads before the window and at
// its thirds, so that each pass narrows it to a third. Once pinned it
// reads once a period, just after each pass, for fresh usage; every
// confirmEvery periods the read after one pass moves to just before the
// next, so that the pair either side of that pass confirms the phase (a
// restart of slurmctld moves it) at the same one read a period. An
// interval shorter than the period adds regular reads; one shorter than a
// third of it is an operator asking for more than three reads a period
// (--reported.interval), and no read then waits longer than it.
func (p *PhaseTracker) Next(lastStart, lastEnd time.Time, interval time.Duration) time.Time {
	next := p.next(lastStart, lastEnd, interval)
	if regular := lastStart.Add(interval); 3*interval < p.Period && regular.Before(next) {
		return phaseLater(regular, lastEnd.Add(phaseMinGap))
	}
	return next
}

// next is Next's schedule, the operator's interval aside.
func (p *PhaseTracker) next(lastStart, lastEnd time.Time, interval time.Duration) time.Time {
	earliest := lastEnd.Add(phaseMinGap)
	// capped: three reads a period at most, whatever the schedule
	capped := func(t time.Time) time.Time {
		if p.haveRead {
			t = phaseLater(t, p.before[0].Add(p.Period))
		}
		return phaseLater(t, earliest)
	}
	quiet := p.quiet(lastEnd)
	limit := lastStart.Add(min(interval, p.Period/3))
	if !p.valid {
		if quiet {
			limit = lastStart.Add(min(interval, p.Period))
		}
		return capped(limit)
	}
	// The guard keeps a read's whole span (of about the last one's length) off
	// the window's edge by more than the second a caller adds to the window
	// (passes fall on whole seconds, and take a moment to show): a read
	// closer to it could show either side of the pass.
	guard := 1500*time.Millisecond + lastEnd.Sub(lastStart)
	occ := func(j time.Duration) (lo, hi time.Time) { return p.lo.Add(j * p.Period), p.hi.Add(j * p.Period) }
	k := phaseFloor(earliest.Sub(p.hi.Add(guard)), p.Period) + 1 // the first occurrence to read after
	lo, hi := occ(k)
	switch {
	case quiet:
		// nothing to infer from: once a period, just after the pass the
		// window (the boot's) says, for fresh values
		return capped(hi.Add(guard))
	case !p.Pinned():
		// a pass after the last third is bracketed by that read and the
		// next occurrence's first
		w := hi.Sub(lo)
		for j := k; j <= k+1; j++ {
			lo, _ := occ(j)
			// no read just before the window when the last one closed a
			// bracket of the previous occurrence, a bracket's length from
			// the window's thirds (bracket: the pass it saw is not the
			// next): it saves one of the period's three reads for the
			// window itself
			after := lastEnd.Equal(p.confirmed) && lo.Add(w/3).Add(lastEnd.Sub(lastStart)).Sub(lastStart) <= p.Period
			for i, c := range []time.Time{lo.Add(-guard), lo.Add(w / 3), lo.Add(2 * w / 3)} {
				if c.Before(earliest) || i == 0 && after {
					continue
				}
				if c = capped(c); i == 0 && c.After(lo.Add(-guard/2)) {
					break // the read before the window would fall in it
				}
				return c
			}
		}
		lo2, _ := occ(k + 2)
		return capped(lo2.Add(-guard))
	case !p.known():
		// pinned by a seed or by brackets not yet agreed: either side of
		// each pass, until one bracket confirms it
		if lo.Add(-guard).After(earliest) {
			return capped(lo.Add(-guard))
		}
		return capped(hi.Add(guard))
	}
	next := hi.Add(guard)
	if lastEnd.Sub(p.confirmed) >= (confirmEvery-1)*p.Period && lo.Sub(lastEnd) > p.Period/2 {
		// the last read followed the pass before this one: skip the read
		// after this one and read just before the next
		lo1, _ := occ(k + 1)
		next = lo1.Add(-guard)
	}
	if interval < p.Period && limit.Before(next) {
		next = limit
	}
	return capped(next)
}

// confirmEvery is how often, in periods, serve's reads bracket a pass
// closely once the phase is pinned. The passes of one boot keep their
// schedule to the second (docs/serve.md#pass-schedule: 0 s in 60 passes
// on 22.05, 24.11 and 26.05), so this is for restarts, which move the
// phase: one read in five, moved rather than added, finds one within five
// periods without asking slurmctld its boot time at every read.
const confirmEvery = 5

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
