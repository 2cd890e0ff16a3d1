package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/passes"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// phase is what is known of the local cluster's pass phase at at: the
// state file's, when it was written by the boot of slurmctld running at
// at (stateFileFor), else the tracker's inference, else unknown (err says
// why the state file was not used).
func (e *Engine) phase(conf *slurmconf.Config, local bool, at time.Time) (fairshare.Passes, time.Time, result.Phase, error) {
	stateDir := ""
	if local {
		stateDir = e.o.stateDir // the phase of other clusters' passes is unknown
	}
	sched, since, err := Decay(conf, stateDir)
	if err == nil {
		if err = e.stateFileFor(sched, conf, at); err != nil {
			// the warning names no moment that moves (warned once):
			// the moments to the nanosecond are here
			e.o.log.Debug().Str("at", at.Format(time.RFC3339Nano)).Str("boot", e.boot.Format(time.RFC3339Nano)).Int64("last_decay_ran", int64(sched.Phase)).Msg("state file's decay pass not used")
			sched.Phase, since = 0, time.Time{}
		}
	}
	phase := result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second} // last_decay_ran is whole seconds
	if err != nil {
		phase = result.Phase{Source: result.PhaseUnknown, Uncertainty: conf.PriorityCalcPeriod}
		if pass, u, ok := e.o.tracker.pass(local, at); ok {
			// passes fall on whole seconds (an absolute deadline of
			// whole seconds); a phase that moves by less would make the
			// rebuild read everything again
			sched.Phase = math.Round(fairshare.Seconds(pass))
			phase = result.Phase{Source: result.PhaseInferred, Uncertainty: u + time.Second}
			err = nil
		} else if local && e.o.tracker == nil && !e.boot.IsZero() && !at.Before(e.boot) {
			// a replay, which has no reads: the passes of a boot fall
			// within passes.BootPhase of it (TestBootPhase), stamped in
			// whole seconds like the state file's
			sched.Phase = float64(e.boot.Add(passes.BootPhase / 2).Unix())
			phase = result.Phase{Source: result.PhaseBoot, Uncertainty: passes.BootPhase/2 + time.Second}
			err = nil
		} else if stateDir == "" {
			err = nil // not asked for: nothing to warn of
		}
	}
	if phase.Source != result.PhaseUnknown && sched.Period > 0 {
		phase.Last = time.Unix(int64(sched.LastPass(fairshare.Seconds(at))), 0)
	}
	return sched, since, phase, err
}

// stateFileFor says why a state file whose last pass is passes.Phase does
// not give the phase at at: slurmctld starts its passes at a new phase at
// every start, so the file holds the phase of the boot that wrote it
// alone. With the boot known, it must have started by at and written the
// file; without it, the file's pass must be within a period (and a moment)
// of at, as a live read's is: a past --at, or a file saved at another
// moment, takes no phase from today's file. The errors name no moment
// that moves, so that serve warns of each once (warnChanged).
func (e *Engine) stateFileFor(passes fairshare.Passes, conf *slurmconf.Config, at time.Time) error {
	ran := time.Unix(int64(passes.Phase), 0)
	const moment = 5 * time.Second // a live read of sshare, then of the file
	switch {
	// the file holds whole seconds, and a start's first pass runs in
	// its boot's second
	case !e.boot.IsZero() && (at.Before(e.boot) || ran.Before(e.boot.Truncate(time.Second))):
		return fmt.Errorf("priority_last_decay_ran (%s) is not of the boot of slurmctld running at the moment computed (started %s)", ran.Format(time.RFC3339), e.boot.Format(time.RFC3339))
	case e.boot.IsZero() && (ran.Sub(at) > conf.PriorityCalcPeriod+moment || at.Sub(ran) > conf.PriorityCalcPeriod+moment):
		return fmt.Errorf("priority_last_decay_ran (%s) is more than a PriorityCalcPeriod from the moment computed and slurmctld's boot is unknown: it may be another boot's", ran.Format(time.RFC3339))
	}
	return nil
}

// Decay is how slurmctld decays usage under conf: the passes, with their
// phase read from stateDir's priority_last_decay_ran, and the last usage
// reset when PriorityUsageResetPeriod sets one. Without a readable state
// file the phase is 0 (unknown) and err says why.
func Decay(conf *slurmconf.Config, stateDir string) (passes fairshare.Passes, since time.Time, err error) {
	passes = conf.Passes()
	ran, reset, err := slurmstate.LastDecayRan(stateDir)
	if err != nil {
		return passes, since, err
	}
	passes.Phase = float64(ran.Unix())
	if conf.ResetsUsage() {
		since = reset
	}
	return passes, since, nil
}
