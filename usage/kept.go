package usage

import (
	"maps"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// KeptTails is what Rebuild takes out of the rolled-up hours for the
// finished jobs in them (Tails of Inputs.Ended, retimed), computed at one
// refresh and decayed to the later ones while the jobs and hours stay the
// same: between two rollups the set is the same at every refresh, and
// weighing each job's passes and hours again at each would be most of a
// steady refresh's CPU at a site that runs thousands of jobs an hour.
//
// Every part of it decays as a whole once the jobs and the hours they are
// taken out of are all a PriorityCalcPeriod behind the last pass: their
// charges, spread hours and partial intervals weigh d^(now−pass), so a
// later pass scales them all by d^(now'−now); the tail risk, weighed from
// the moment At (tailRisk), by d^(At'−At). The one part that moves
// otherwise is the horizon of rowWeight, which cuts a job that started
// before it: the kept sums stop serving once the horizon passes the
// earliest start they hold.
type KeptTails struct {
	sums     Frozen
	now      float64
	minStart int64
	problems []error
	// what the sums were computed for, but for the jobs themselves
	passes      fairshare.Passes
	lastHourly  int64
	hoursFrom   float64
	since       float64
	rowsByQOS   bool
	usageFactor map[uint32]float64
	jobs        int
}

// KeepTails is Tails(in.Ended, true) to be decayed to later refreshes of
// the same Ended jobs, or nil while it would not decay as a whole: the
// last rolled-up hour, and so a tail's lost interval (tailRisk), is not
// yet a PriorityCalcPeriod behind the last pass, or the horizon has
// passed a job's start already (it would not serve even now, and the
// tails would be computed twice).
func (in *Inputs) KeepTails() *KeptTails {
	now := in.Passes.LastPass(in.At)
	if in.Passes.Period <= 0 || float64(in.LastHourly)+in.Passes.Period > now {
		return nil
	}
	k := &KeptTails{now: now, minStart: math.MaxInt64, passes: in.Passes, lastHourly: in.LastHourly, hoursFrom: in.HoursFrom,
		since: in.Since, rowsByQOS: in.RowsByQOS, usageFactor: in.UsageFactor, jobs: len(in.Ended)}
	for _, j := range in.Ended {
		k.minStart = min(k.minStart, j.Start)
	}
	if !k.withinHorizon(in) {
		return nil
	}
	c := *in // its weights cached for this moment stay with the copy
	k.sums, k.problems = c.Tails(in.Ended, true)
	return k
}

// Serves says whether k, kept for the same Ended jobs, decays to in.
func (k *KeptTails) Serves(in *Inputs) bool {
	if k == nil || in.At < k.sums.At || k.passes != in.Passes || k.lastHourly != in.LastHourly || k.hoursFrom != in.HoursFrom ||
		k.since != in.Since || k.rowsByQOS != in.RowsByQOS || k.jobs != len(in.Ended) || !maps.Equal(k.usageFactor, in.UsageFactor) {
		return false
	}
	return k.withinHorizon(in)
}

// withinHorizon: no job k holds started before the horizon at in.At
// (rowWeight cuts such a job there).
func (k *KeptTails) withinHorizon(in *Inputs) bool {
	rows, _ := Horizon(in.Passes, int64(in.At), int64(in.Since))
	return rows <= k.minStart
}

// endedTails is Tails(in.Ended, true) with the decay of its tail risk
// and of the rest since: in.Kept's sums where it serves, else computed
// (decays 1).
func (in *Inputs) endedTails() (t Frozen, byPass, byMoment float64, problems []error) {
	k := in.Kept
	if !k.Serves(in) {
		t, problems = in.Tails(in.Ended, true)
		return t, 1, 1, problems
	}
	return k.sums, math.Pow(in.Passes.D(), in.Passes.LastPass(in.At)-k.now), k.sums.Scale(in.Passes, in.At), k.problems
}

// tailRiskKey: the TRES that hold the tail risk (tresTailRate).
func tailRiskKey(id uint32) bool {
	return id == tresTailRate || id == tresTailMost || id == tresTailLost
}
