package usage

import (
	"fmt"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Tails takes finished jobs' uncharged last intervals (tail) out of the
// rolled-up usage, which counts them: the (negative) usage per id_assoc
// and TRES, and the uncharged billing usage per id_assoc. With retimed,
// the usage also moves their seconds in partial hours to their own time
// (see retime).
func (in *Inputs) Tails(jobs []Job, retimed bool) (Frozen, []error) {
	f := NewFrozen(in.At)
	var problems []error
	for _, j := range jobs {
		t, r := in.tail(j, in.Since), 0.0
		out := t // what comes out of the rows
		if retimed {
			// retime weighs the tail's seconds in the hours it moves as
			// slurmctld charged them: not at all
			r = in.retime(j)
			for _, h := range in.retimedHours(j) {
				out -= in.tailIn(j, in.Since, float64(h), float64(h+3600))
			}
		}
		rate, most, lost := in.tailRisk(j, in.Since)
		per, billing, err := jobTRES(j, in.UsageFactor)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for _, c := range in.rowExcess(j, per) {
			f.Usage[Key{j.Assoc, c.id}] += c.per
		}
		if j.Spread > 0 {
			// weighed as the job's seconds are: the rows', retimed, less
			// the tail slurmctld did not charge
			f.Usage[Key{j.Assoc, tresUnpriced}] += j.Spread * factor(in.UsageFactor, j.QOS) * max(0, in.rowWeight(j)+r-out)
		}
		if t == 0 && r == 0 && rate == 0 {
			continue
		}
		for _, c := range per {
			f.Usage[Key{j.Assoc, c.id}] += (r - out) * c.per
		}
		if t != 0 {
			f.Uncharged[j.Assoc] += t * billing
		}
		f.Usage[Key{j.Assoc, tresTailRate}] += rate * billing
		f.Usage[Key{j.Assoc, tresTailMost}] += most * billing
		f.Usage[Key{j.Assoc, tresTailLost}] += lost * billing
	}
	return f, problems
}

// tailRisk is j's part of TailRisk per unit of billing (0 for a running
// job, or when slurmctld charges the tail at the job's end).
func (in *Inputs) tailRisk(j Job, from float64) (rate, most, lost float64) {
	if in.Passes.ChargeJobEnd || j.End == 0 {
		return 0, 0, 0
	}
	end := float64(j.End)
	start := max(float64(j.Start), from)
	if end <= start {
		return 0, 0, 0
	}
	rate = math.Pow(in.Passes.D(), max(0, in.At-end))
	if p := in.Passes; p.LockWait > 0 && p.Period > 0 {
		// the pass's charge of its interval, decayed from the pass: at
		// least d^(At-end+P) since At is less than a period past it
		if pass := p.LastPass(end); end-pass <= p.LockWait && pass > start {
			lost = math.Pow(p.D(), max(0, in.At-end-p.Period)) * (pass - max(start, pass-p.Period))
		}
	}
	return rate, rate * min(in.Passes.Period, end-start), lost
}

// ranWithinPeriod: j ran at some time in the PriorityCalcPeriod up to At.
func (in *Inputs) ranWithinPeriod(j Job) bool {
	return j.Start > 0 && float64(j.Start) < in.At && (j.End == 0 || float64(j.End) > in.At-in.Passes.Period)
}

// tail is the decayed usage per unit of count that slurmctld never charges
// of a finished job: from the last pass before its end (or its start,
// whichever is later, but not before from) to its end, unless
// AccountingStorageEnforce=limits charges it at the end.
func (in *Inputs) tail(j Job, from float64) float64 {
	return in.tailIn(j, from, math.Inf(-1), math.Inf(1))
}

// tailIn is the part of tail in [lo, hi).
func (in *Inputs) tailIn(j Job, from, lo, hi float64) float64 {
	if in.Passes.ChargeJobEnd || j.End == 0 {
		return 0
	}
	end := min(float64(j.End), hi)
	start := max(float64(j.Start), from, in.Passes.LastPass(float64(j.End)), lo)
	if end <= start {
		return 0
	}
	return in.Passes.BucketUsage(start, end, in.At, end-start)
}

// tailSlack is how far below zero (TRES-seconds) an association's own
// usage may come out and still be rounding. A finished job's tail is taken
// out of rollups that were spread over their hour, decayed and summed in
// another order (frozen sums are scaled once per refresh), so a job whose
// whole usage is its tail leaves a remainder of either sign near 0, such
// as -9.2e-11 after two days of decay, which must not fail a refresh.
const tailSlack = 1.0

// clampTails sets negative own usage (before subtree sums) to 0: usage
// cannot be below zero, and fairshare rejects it. A value below -tailSlack
// is more than rounding: the job records and rollups disagree, and it is
// reported.
func clampTails(s []float64, id uint32, assocs []fairshare.Association) (problems []error) {
	for i, v := range s {
		if v >= 0 {
			continue
		}
		if v < -tailSlack {
			a := assocs[i]
			problems = append(problems, &Problem{Identity: fmt.Sprintf("negative usage of id_tres=%d of account=%q user=%q", id, a.Account, a.User),
				Err: fmt.Errorf("usage of id_tres=%d of account=%q user=%q is %g after taking out finished jobs' uncharged tails: the job records and rollups disagree: counted as 0", id, a.Account, a.User, v)})
		}
		s[i] = 0
	}
	return problems
}
