package fairshare

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Recovery is Crossings of each user users[k] under its own default
// assumption, f.Quiet(users[k]), for about the price of one: the users'
// scenarios differ from the one shared scenario (every association at the
// larger of its rate and its running jobs' billing) only along each
// user's own path. Under Quiet(i), user i's rate and steps are gone and
// its running jobs are charged instead: a difference δ(t) in i's usage,
// and so in that of each of its ancestors, everyone else's being the
// shared scenario's.
//
//   - classic: user i's factor depends on the usage of i, of its
//     ancestors and of root, so it is computed exactly along i's path,
//     O(depth) for each user and evaluated moment.
//   - Fair Tree: at each level of i's path, the siblings of the path's
//     association keep their usage, and their parent's moves by δ, which
//     scales every sibling's LevelFS by the same factor: i's rank counts
//     the users of the siblings whose level is above the path's
//     association's, each compared on its own (fairRanks). Exact but for
//     exact ties, which the shared order breaks (rankView.values).
//
// Every usage in it is a + b·x at a pass, x = d^(passes since), and so
// is δ between the passes where one of i's jobs starts or ends being
// charged, or anyone's step (recoveryUser.breaks; the steps' usage of a
// subtree is in closed form, stepSums). There, a classic factor is one
// ratio of such terms over root's usage (effective usage sums normalized usages
// with weights in [0,1]): monotone in x. Under Fair Tree each comparison
// with a sibling, ns_s·(u_c+δ) against ns_c·u_s, changes sign at most
// once. So the first crossing is found without looking at every sample:
// between two breaks a factor that is on its starting side at both ends
// is at every sample in between (crossFirst), and a Fair Tree rank moves
// only where a comparison changes, found by bisection. The samples and
// the bisection that answer are Crossings' own: the answer is the same
// pass.
//
// What keeps the steps' many breaks cheap: a classic factor is bounded
// over blocks of samples first (classicSkip), and only the blocks whose
// bounds reach the threshold are looked at run by run. A Fair Tree
// comparison with a sibling changes form only at the breaks of the two
// subtrees and of δ, not of the whole cluster; between two sibling
// accounts it is first taken without δ, once for every user below
// (sharedScenario.pair), and a run that stays farther from 0 than δ can
// move it needs no look.
//
// Depth-oblivious classic mixes the siblings' usage into each level and
// is not supported. users must be user associations.
func (f *Forecast) Recovery(users []int, thresholds []float64, horizon, step float64) ([]Crossing, error) {
	t := f.Tree
	for _, i := range users {
		if i < 0 || i >= t.Len() || !t.isUser(int32(i)) {
			return nil, fmt.Errorf("forecast: association %d: expected a user association", i)
		}
	}
	if f.Algorithm != AlgorithmClassic && f.Algorithm != AlgorithmFairTree {
		return nil, fmt.Errorf("forecast: per-user recovery under %q: expected classic or fair_tree", f.Algorithm)
	}
	if len(users) != len(thresholds) {
		return nil, fmt.Errorf("forecast: %d associations and %d thresholds: expected one threshold each", len(users), len(thresholds))
	}
	if f.Passes.Period <= 0 {
		return nil, fmt.Errorf("forecast: pass period %v: expected PriorityCalcPeriod > 0", f.Passes.Period)
	}
	sc := &sharedScenario{f: f, last: f.Passes.LastPass(f.At), subRate: make([]float64, t.Len()), memo: make([][]float64, t.Len()), sums: make([]*stepSums, t.Len())}
	// the shared scenario: each association's usage at t is
	// raw·decay + subRate·unit + its subtree's steps, subtrees summed
	copy(sc.subRate, f.Rate)
	for k := len(t.order) - 1; k > 0; k-- {
		i := t.order[k]
		sc.subRate[t.parent[i]] += sc.subRate[i]
	}
	_, sc.steps = f.committed(func(int) bool { return false })
	sc.sub = make([][]int32, t.Len())
	for n, st := range sc.steps {
		for d := int32(st.Assoc); d >= 0; d = t.parent[d] {
			sc.sub[d] = append(sc.sub[d], int32(n))
		}
	}
	jobs := map[int32][]RunningJob{}
	for _, j := range f.Jobs {
		jobs[int32(j.Assoc)] = append(jobs[int32(j.Assoc)], j)
	}
	now, err := t.Compute(f.Algorithm, f.Dampening)
	if err != nil {
		return nil, err
	}
	samples := f.samples(horizon, step)
	endPass := f.Passes.LastPass(samples[len(samples)-1])
	sc.endPass, sc.subBrk, sc.pairs = endPass, make([][]float64, t.Len()), map[[2]int32]*pairRuns{}
	sc.breaks = sc.stepBreaks(sc.steps, endPass)
	sc.moments = make([]moment, int((endPass-sc.last)/f.Passes.Period)+2)
	sc.starts = f.runStarts(samples, sc.breaks)
	var count []int32
	if f.Algorithm == AlgorithmFairTree {
		count = t.walkUsers()
	}
	out := make([]Crossing, len(users))
	ue := make([]float64, t.Len())
	var path []int32
	for k, i := range users {
		u := sc.user(int32(i), jobs[int32(i)], endPass)
		value := func(q float64) Values {
			m := sc.at(q)
			return t.classicShifted(u.i, func(k int32) float64 { return sc.usage(k, &m) }, u.delta(m), now, f.Dampening, ue, &path)
		}
		var starts []int
		var skip func(a, b int, rising bool) bool
		if f.Algorithm == AlgorithmFairTree {
			r := u.fairRanks(now, count)
			value, starts = r.value, f.runStarts(samples, r.breaks)
		} else {
			starts = f.runStarts(samples, u.own)
			if len(sc.starts) > 1 {
				starts = mergeSorted(starts, sc.starts)
				skip = sc.classicSkip(u, samples, now, thresholds[k], ue)
			}
		}
		if out[k], err = f.crossFirst(samples, starts, value, thresholds[k], skip); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runStarts are the runs of samples between breaks (sorted): each starts
// at the first sample or at the first sample at or past a break.
func (f *Forecast) runStarts(samples, breaks []float64) []int {
	p := f.Passes
	starts := []int{1}
	for _, b := range breaks {
		j, _ := slices.BinarySearchFunc(samples, b, func(s, b float64) int { return cmp.Compare(p.LastPass(s), b) })
		if j > starts[len(starts)-1] && j < len(samples) {
			starts = append(starts, j)
		}
	}
	return starts
}

// mergeSorted is the union of a and b (each sorted), once each: the runs
// of samples between the breaks of both, or the breaks of both.
func mergeSorted[T cmp.Ordered](a, b []T) []T {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]T, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		var j T
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] <= b[0]:
			j, a = a[0], a[1:]
		default:
			j, b = b[0], b[1:]
		}
		if len(out) == 0 || j > out[len(out)-1] {
			out = append(out, j)
		}
	}
	return out
}

// crossFirst is search for one series whose value at a pass is value
// and is monotone over each run of samples (runStarts): the first
// sample on the other side of thr than at At is found by looking at the
// ends of each run, and the crossing by the same bisection.
//
// skip (nil: none), given samples a to b and the side, may say that none
// of them crosses.
func (f *Forecast) crossFirst(samples []float64, starts []int, value func(q float64) Values, thr float64, skip func(a, b int, rising bool) bool) (Crossing, error) {
	p := f.Passes
	v := value(f.At)
	c := Crossing{Rising: v.FairShare < thr, Values: v}
	if math.IsNaN(v.FairShare) {
		return c, nil
	}
	crossed := func(j int) bool { return !(value(p.LastPass(samples[j])).FairShare < thr) == c.Rising }
	for r, a := range starts {
		b := len(samples) - 1
		if r+1 < len(starts) {
			b = starts[r+1] - 1
		}
		if a > b || skip != nil && skip(a, b, c.Rising) {
			continue
		}
		hit := -1
		switch {
		case crossed(a):
			hit = a
		case a < b && crossed(b):
			lo, hi := a, b
			for hi-lo > 1 {
				if mid := (lo + hi) / 2; crossed(mid) {
					hi = mid
				} else {
					lo = mid
				}
			}
			hit = hi
		default:
			continue
		}
		at := func(q float64) (func(int) Values, error) {
			v := value(q)
			return func(int) Values { return v }, nil
		}
		side := func(v float64, _ int) bool { return !(v < thr) }
		return f.bisect(at, 0, samples[hit-1], samples[hit], side, c.Rising)
	}
	return c, nil
}

// runSpan is the k-th run of passes between breaks (sorted pass moments
// where a usage changes form): from the break before it (from, for the
// first) to the pass before the next break (to, for the last), never
// ending before it starts.
func runSpan(breaks []float64, k int, from, to, period float64) (a, b float64) {
	a, b = from, to
	if k > 0 {
		a = breaks[k-1]
	}
	if k < len(breaks) {
		b = breaks[k] - period
	}
	return a, math.Max(b, a)
}
