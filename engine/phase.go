package engine

import (
	"sync"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// phase holds the pass-phase tracker, which the report loop (when to read)
// and the refresh loop (what reads show, where passes fall) share.
type phase struct {
	mu sync.Mutex
	t  *drift.PhaseTracker
	// period is Conf's PriorityCalcPeriod, which the refresh loop sets
	// (the report loop must not read Conf, which that loop replaces)
	period time.Duration
	boot   time.Time // slurmctld's, at the last read
	// passes counts the passes seen between reads (drift.PassBetween):
	// what the tracker is given, so that a job's end charged between
	// passes is not taken for one
	passes uint64
	last   *shares.Table
	// settling: slurmctld started since the last pass seen between two
	// reads of it (drift.Input.Settling)
	settling bool
}

// setPeriod follows conf's PriorityCalcPeriod.
func (p *phase) setPeriod(d time.Duration) {
	p.mu.Lock()
	p.period = d
	p.mu.Unlock()
}

// observe records a read of the reported side, slurmctld having booted at
// boot (zero: unknown), and reports whether a pass fell since the read
// before (drift.PassBetween) and whether slurmctld is settling
// (drift.Input.Settling); a new PriorityCalcPeriod or a restart of
// slurmctld, which starts its passes at a new phase, starts the inference
// afresh.
func (e *Exporter) observe(start, end, boot time.Time, out *shares.Table) (pass, settling bool) {
	e.phase.mu.Lock()
	defer e.phase.mu.Unlock()
	first := e.phase.last == nil
	pass = !first && drift.PassBetween(e.phase.last, out)
	e.phase.last = out
	if pass {
		e.phase.passes++
	}
	restarted := !boot.IsZero() && !e.phase.boot.IsZero() && !boot.Equal(e.phase.boot)
	switch {
	case restarted:
		e.phase.settling = true
	case first:
		// the exporter may start with slurmctld: two periods cover its
		// first pass and the one after
		e.phase.settling = !boot.IsZero() && start.Sub(boot) < 2*e.phase.period
	case pass:
		e.phase.settling = false
	}
	if !boot.IsZero() {
		e.phase.boot = boot
	}
	if p := e.phase.period; p > 0 && (e.phase.t == nil || e.phase.t.Period != p || restarted) {
		e.phase.t = &drift.PhaseTracker{Period: p, Confirm: 1}
	}
	if e.phase.t != nil {
		e.phase.t.Observe(start, end, e.phase.passes)
	}
	return pass, e.phase.settling
}

// inferredPass is slurmctld's last decay pass at or before at as the
// reads inferred it, for the local cluster (ok false: not pinned).
func (e *Exporter) inferredPass(local bool, at time.Time) (pass time.Time, uncertainty time.Duration, ok bool) {
	if !local {
		return pass, 0, false
	}
	e.phase.mu.Lock()
	defer e.phase.mu.Unlock()
	if e.phase.t == nil || e.phase.t.Period != e.phase.period {
		return pass, 0, false
	}
	return e.phase.t.Pass(at)
}

// nextRead is when to read the reported side next: just after the
// state file's next pass when it is readable, so that no read straddles a
// pass; otherwise as the tracker schedules reads to pin the phase and
// then to read just after each pass.
func (e *Exporter) nextRead(start, end time.Time) time.Time {
	e.phase.mu.Lock()
	t := e.phase.t
	e.phase.mu.Unlock()
	regular := start.Add(e.ReportedInterval)
	if t == nil {
		return regular
	}
	if e.StateDir != "" {
		if ran, _, err := slurmstate.LastDecayRan(e.StateDir); err == nil {
			p := fairshare.Passes{Period: t.Period.Seconds(), Phase: float64(ran.Unix())}
			next := time.Unix(int64(p.LastPass(float64(end.Unix()))+p.Period), 0)
			// whole seconds, and the pass itself takes a moment
			next = next.Add(time.Second + end.Sub(start))
			return minTime(next, regular)
		}
	}
	e.phase.mu.Lock()
	defer e.phase.mu.Unlock()
	return e.phase.t.Next(start, end, e.ReportedInterval)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// InferPhase gives the exporter a tracker that has seen reads of the
// reported side (check, which reads sshare across a pass itself).
func (e *Exporter) InferPhase(t *drift.PhaseTracker) {
	e.phase.mu.Lock()
	e.phase.t, e.phase.period = t, t.Period
	e.phase.mu.Unlock()
}
