package fairshare

import (
	"fmt"
	"math"
	"slices"
)

// Decay alone changes no factor: both algorithms depend on ratios of
// usage, and a pass scales every association's usage by the same d^Δ. A
// factor recovers only because others keep using the machine while this
// association does not, so a forecast is only as good as what it assumes
// of everyone's future usage: Forecast takes it as running jobs and a rate
// per association, and says nothing of its own.

// RunningJob is a job slurmctld keeps charging until End.
type RunningJob struct {
	// Assoc is the index of its association in the tree.
	Assoc int
	// Billing is its billable TRES per second, QOS UsageFactor applied.
	Billing float64
	// Start and End in unix seconds; End is when its time limit stops it
	// (+Inf: no limit).
	Start, End float64
}

// Forecast steps a tree's usage forward the way slurmctld does (Passes)
// and recomputes the factors at any later moment. Time is a parameter:
// nothing reads a clock.
type Forecast struct {
	// Tree holds the decayed usage as it stands at At, that is after the
	// last pass at or before At (the rebuild's convention).
	Tree      *Tree
	Algorithm Algorithm
	Dampening float64
	Passes    Passes
	At        float64
	// Jobs are charged from the later of their start and the last pass
	// at or before At, to their End.
	Jobs []RunningJob
	// Rate is each association's own future usage in billing-seconds per
	// second from the last pass at or before At on, not summed over its
	// subtree (nil: none).
	Rate []float64
	// Steps are usage charged on top of Rate.
	Steps []RateStep
}

// RateStep is usage charged like a rate, pass interval by pass interval,
// from From to To (+Inf: for good): what an association's running jobs
// commit above its rate (Forecast.Quiet).
type RateStep struct {
	Assoc          int
	Rate, From, To float64
}

// stepUsage is what step s adds to its association's usage at t, charged
// from the pass last on.
func (p Passes) stepUsage(s RateStep, last, t float64) float64 {
	from, to := math.Max(s.From, last), math.Min(s.To, t)
	if to <= from {
		return 0
	}
	return s.Rate * p.BucketUsage(from, to, t, to-from)
}

// Usage is every association's raw usage at t (>= At), subtrees summed.
//
// Usage after a pass is a + b·d^(t−pass) in closed form: the current usage
// decays; a constant rate r charged pass by pass since the pass at or
// before At adds r·Passes.BucketUsage of a unit rate, which is exact for
// whole pass intervals; a job is a constant rate between its first and
// last charged pass. The one approximation is BucketUsage's at a job's
// edges: an interval it covers only in part is weighted d^Period instead
// of slurmctld's d^Δ, a relative error below 0.693·Period/HalfLife of that
// interval's charge.
func (f *Forecast) Usage(t float64) []float64 {
	tr, p := f.Tree, f.Passes
	last := p.LastPass(f.At)
	t = math.Max(t, last)
	out := make([]float64, tr.Len())
	if f.Rate != nil {
		unit := p.BucketUsage(last, t, t, t-last)
		for i, r := range f.Rate {
			out[i] = r * unit
		}
	}
	for _, j := range f.Jobs {
		out[j.Assoc] += f.jobUsage(j, last, t)
	}
	for _, s := range f.Steps {
		out[s.Assoc] += p.stepUsage(s, last, t)
	}
	// subtree sums, children before parents
	for k := len(tr.order) - 1; k > 0; k-- {
		i := tr.order[k]
		out[tr.parent[i]] += out[i]
	}
	decay := p.pow(p.LastPass(t) - last)
	for i := range out {
		out[i] += tr.raw[i] * decay
	}
	return out
}

// jobUsage is what job j adds to its association's usage at t, charged
// from the pass last on.
func (f *Forecast) jobUsage(j RunningJob, last, t float64) float64 {
	p := f.Passes
	from, end := math.Max(j.Start, last), math.Min(j.End, t)
	if !p.ChargeJobEnd && j.End <= t {
		// without limits slurmctld never charges a finished job's
		// last partial interval (priority_p_job_end does nothing)
		end = p.LastPass(j.End)
	}
	if end <= from {
		return 0
	}
	return p.BucketUsage(from, end, t, j.Billing*(end-from))
}

// Values are the algorithm's values at t.
func (f *Forecast) Values(t float64) ([]Values, error) {
	return f.Tree.WithUsage(f.Usage(t)).Compute(f.Algorithm, f.Dampening)
}

// Quiet is f under the default assumption for association i: i and its
// subtree submit nothing new (no rate) while their running jobs run to
// their End; every other association uses the cluster at, each moment,
// the larger of its rate and the billing its running jobs commit (they
// run to their End too). A rate from rollups that do not cover the window
// yet, or an average below a wide job running now, would otherwise let
// the others' usage fall below what slurmctld will certainly charge.
func (f Forecast) Quiet(i int) Forecast {
	in := f.Tree.subtree(i)
	f.Jobs, f.Steps = f.committed(func(k int) bool { return in[k] })
	if f.Rate != nil {
		f.Rate = slices.Clone(f.Rate)
		for k := range f.Rate {
			if in[k] {
				f.Rate[k] = 0
			}
		}
	}
	return f
}

// committed splits f's running jobs: those of associations quiet keeps
// stay jobs; the others become steps, per association the part of their
// jobs' billing above its rate between job ends (max(rate, committed) =
// rate + steps), appended to f's steps of associations quiet does not keep.
func (f Forecast) committed(quiet func(int) bool) (jobs []RunningJob, steps []RateStep) {
	last := f.Passes.LastPass(f.At)
	for _, s := range f.Steps {
		if !quiet(s.Assoc) {
			steps = append(steps, s)
		}
	}
	byAssoc := map[int][]RunningJob{}
	var order []int
	for _, j := range f.Jobs {
		if quiet(j.Assoc) {
			jobs = append(jobs, j)
			continue
		}
		if byAssoc[j.Assoc] == nil {
			order = append(order, j.Assoc)
		}
		byAssoc[j.Assoc] = append(byAssoc[j.Assoc], j)
	}
	for _, a := range order {
		js := byAssoc[a]
		rate := 0.0
		if f.Rate != nil {
			rate = f.Rate[a]
		}
		var times []float64
		for _, j := range js {
			times = append(times, math.Max(j.Start, last), j.End)
		}
		slices.Sort(times)
		times = slices.Compact(times)
		for k := 0; k+1 < len(times); k++ {
			from, to, c := times[k], times[k+1], 0.0
			for _, j := range js {
				if math.Max(j.Start, last) <= from && j.End > from {
					c += j.Billing
				}
			}
			if c > rate {
				steps = append(steps, RateStep{Assoc: a, Rate: c - rate, From: from, To: to})
			}
		}
	}
	return jobs, steps
}

// subtree marks i and every association below it.
func (t *Tree) subtree(i int) []bool {
	in := make([]bool, t.Len())
	in[i] = true
	for _, k := range t.order {
		if p := t.parent[k]; p >= 0 && in[p] {
			in[k] = true
		}
	}
	return in
}

// WithUsage is t with raw usage raw (indexed like t): the same structure,
// so it costs a copy of the associations instead of NewTree's checks.
func (t *Tree) WithUsage(raw []float64) *Tree {
	c := *t
	c.assocs = slices.Clone(t.assocs)
	c.raw = slices.Clone(raw)
	for i := range c.assocs {
		c.assocs[i].RawUsage = raw[i]
	}
	return &c
}

// Crossing is where a factor first lands on the other side of a
// threshold.
type Crossing struct {
	// At is the first pass at which the factor is on the other side of
	// Threshold than at Forecast.At (unix seconds); meaningful when Found.
	At    float64
	Found bool
	// Rising: the factor starts below Threshold (and so crosses upwards).
	Rising bool
	Values Values
}

// Crossings finds, for each association assocs[k], the first pass up to
// At+horizon at which its FairShare (Fair Tree: rank/users) is on the
// other side of thresholds[k] than at At: at or above it when it starts
// below, below it when it starts at or above. It samples every step
// seconds (a multiple of Passes.Period is best; at least one period) and
// bisects over the passes between the first sample past the threshold
// and the one before: usage moves only at passes, so the crossing is a
// pass. A factor that crosses and crosses back between two samples is
// not seen. The samples are shared by every association, and so are
// the bisection's evaluations where brackets meet: a collector can ask for
// many at once for the price of about horizon/step computations of the
// tree.
func (f *Forecast) Crossings(assocs []int, thresholds []float64, horizon, step float64) ([]Crossing, error) {
	return f.search(assocs, thresholds, horizon, step, func(t float64) (func(k int) Values, error) {
		vals, err := f.Values(t)
		if err != nil {
			return nil, err
		}
		return func(k int) Values { return vals[assocs[k]] }, nil
	})
}

// search is Crossings over the values that at gives, at a pass, for each
// assocs[k] (at's function takes k).
func (f *Forecast) search(assocs []int, thresholds []float64, horizon, step float64, at func(t float64) (func(k int) Values, error)) ([]Crossing, error) {
	if len(assocs) != len(thresholds) {
		return nil, fmt.Errorf("forecast: %d associations and %d thresholds: expected one threshold each", len(assocs), len(thresholds))
	}
	if f.Passes.Period <= 0 {
		return nil, fmt.Errorf("forecast: pass period %v: expected PriorityCalcPeriod > 0", f.Passes.Period)
	}
	// a bisection stays between the last two samples: what it computed
	// before them is of no more use
	memo := map[float64]func(int) Values{}
	eval := func(t float64) (func(int) Values, error) {
		t = f.Passes.LastPass(t)
		if v, ok := memo[t]; ok {
			return v, nil
		}
		v, err := at(t)
		memo[t] = v
		return v, err
	}
	now, err := at(f.At)
	if err != nil {
		return nil, err
	}
	out := make([]Crossing, len(assocs))
	lo := make([]float64, len(assocs)) // the last sample on the starting side
	blank := make([]bool, len(assocs))
	open := 0
	for k := range assocs {
		v := now(k)
		out[k] = Crossing{Rising: v.FairShare < thresholds[k], Values: v}
		lo[k] = f.At
		blank[k] = math.IsNaN(v.FairShare)
		if !blank[k] {
			open++
		}
	}
	side := func(v float64, k int) bool { return !(v < thresholds[k]) }
	for _, t := range f.samples(horizon, step)[1:] {
		if open == 0 {
			break
		}
		clear(memo)
		vals, err := eval(t)
		if err != nil {
			return nil, err
		}
		for k := range assocs {
			if out[k].Found || blank[k] {
				continue
			}
			if side(vals(k).FairShare, k) == out[k].Rising {
				if out[k], err = f.bisect(eval, k, lo[k], t, side, out[k].Rising); err != nil {
					return nil, err
				}
				open--
				continue
			}
			lo[k] = t
		}
	}
	return out, nil
}

// samples are the moments search looks at: At, then every step (at
// least one pass period) up to At+horizon, which is the last.
func (f *Forecast) samples(horizon, step float64) []float64 {
	step = math.Max(step, f.Passes.Period)
	end := f.At + horizon
	out := []float64{f.At}
	for t := f.At + step; t < end+step; t += step {
		t = math.Min(t, end)
		out = append(out, t)
		if t == end {
			break
		}
	}
	return out
}

// bisect finds the first pass in (lo, hi] whose value of series k is on
// side crossed, the value at lo not being and the one at hi being.
func (f *Forecast) bisect(at func(float64) (func(int) Values, error), k int, lo, hi float64, side func(float64, int) bool, rising bool) (Crossing, error) {
	p := f.Passes.Period
	ql, qh := f.Passes.LastPass(lo), f.Passes.LastPass(hi)
	for qh-ql > p*1.5 {
		mid := ql + math.Floor((qh-ql)/p/2)*p
		vals, err := at(mid)
		if err != nil {
			return Crossing{}, err
		}
		if side(vals(k).FairShare, k) == rising {
			qh = mid
		} else {
			ql = mid
		}
	}
	vals, err := at(qh)
	if err != nil {
		return Crossing{}, err
	}
	return Crossing{At: qh, Found: true, Rising: rising, Values: vals(k)}, nil
}

// FairLevel is association i's values if its own usage matched its
// shares exactly, everyone else's unchanged: under classic 2^(−1/damp)
// (effective usage equal to normalized shares); under Fair Tree the rank
// it holds at LevelFS 1, its usage set to its share of its fs parent's.
// A user whose LevelFS cannot be 1 (FairShare=parent, no shares, an only
// child, siblings without usage) keeps its usage.
func (t *Tree) FairLevel(i int, alg Algorithm, dampening float64) (Values, error) {
	if alg != AlgorithmFairTree {
		vals, err := t.Compute(alg, dampening)
		if err != nil {
			return Values{}, err
		}
		v := vals[i]
		if dampening <= 0 {
			dampening = 1
		}
		v.FairShare = ClassicFactor(1, 1, dampening)
		v.EffectiveUsage = v.NormShares
		return v, nil
	}
	raw := slices.Clone(t.raw)
	if shift, ok := t.fairShift(int32(i)); ok {
		for d := int32(i); d >= 0; d = t.parent[d] {
			raw[d] += shift
		}
	}
	return t.WithUsage(raw).FairTree()[i], nil
}

// fairShift is how much more usage Fair Tree user k needs for LevelFS 1
// (negative: less); its ancestors' usage moves with it. ok is false where
// FairLevel keeps its usage.
func (t *Tree) fairShift(k int32) (shift float64, ok bool) {
	if k == t.root || t.usesParent(k) || t.shares[k] <= 0 || t.levelShares[k] <= 0 {
		return 0, false
	}
	s := t.shares[k] / t.levelShares[k]
	// x/(others+x) = s; beside siblings without usage, or as an only
	// child, no usage gives LevelFS 1
	others := t.raw[t.fsParent[k]] - t.raw[k]
	if s >= 1 || others <= 0 {
		return 0, false
	}
	return s*others/(1-s) - t.raw[k], true
}
