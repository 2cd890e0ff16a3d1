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

// skipBlock is how many samples classicSkip bounds together.
const skipBlock = 16

// classicSkip bounds user u's classic factor over blocks of samples: the
// usage of each association on its path and of root between its lowest
// and highest at the block's samples (kept per association, shared by
// every user), u's own usage and δ between their values at the block's
// ends and at u's breaks inside (they are monotone between those), each
// normalized usage between the lowest over the highest and back, and the
// effective usage, monotone in each, between the two. A block whose
// bounds stay on the starting side of thr (with a margin for rounding)
// has no sample that crosses.
func (s *sharedScenario) classicSkip(u *recoveryUser, samples []float64, now []Values, thr float64, ue []float64) func(a, b int, rising bool) bool {
	t := s.f.Tree
	damp := s.f.Dampening
	if damp <= 0 {
		damp = 1
	}
	nb := (len(samples) - 1 + skipBlock - 1) / skipBlock
	cb := &classicBlocks{s: s, u: u, samples: samples, now: now, thr: thr, damp: damp,
		brk:   mergeSorted(u.own, s.subBreaks(u.i)),
		state: [2][]uint8{make([]uint8, nb), make([]uint8, nb)},
		uLo:   map[int32]float64{},
		uHi:   map[int32]float64{},
		ueLo:  ue,
		ueHi:  make([]float64, t.Len()),
	}
	for d := u.i; d >= 0; d = t.parent[d] {
		cb.path = append(cb.path, d)
	}
	return cb.skip
}

// classicBlocks is classicSkip's bounds of one user's classic factor,
// block by block.
type classicBlocks struct {
	s         *sharedScenario
	u         *recoveryUser
	samples   []float64
	now       []Values
	thr, damp float64
	// brk are u's own breaks and its subtree's steps'
	brk []float64
	// per block: 0 not yet, 1 may cross, 2 none crosses; by side
	state [2][]uint8
	// path is u's, up to root
	path []int32
	// the bounds of the block at hand: usage and effective usage by
	// association on the path
	uLo, uHi   map[int32]float64
	ueLo, ueHi []float64
}

// skip says whether no sample from a to b crosses on the given side,
// bounding each block they touch once.
func (cb *classicBlocks) skip(a, b int, rising bool) bool {
	side := 0
	if rising {
		side = 1
	}
	state := cb.state[side]
	for blk := (a - 1) / skipBlock; blk <= (b-1)/skipBlock; blk++ {
		if state[blk] == 0 {
			state[blk] = 1
			if cb.bound(blk, rising) {
				state[blk] = 2
			}
		}
		if state[blk] != 2 {
			return false
		}
	}
	return true
}

// span is a running lowest and highest.
type span struct{ lo, hi float64 }

func emptySpan() span { return span{math.Inf(1), math.Inf(-1)} }

func (r *span) add(v float64) { r.lo, r.hi = math.Min(r.lo, v), math.Max(r.hi, v) }

// bound says whether the factor stays on its starting side at every
// sample of block blk.
func (cb *classicBlocks) bound(blk int, rising bool) bool {
	s, t, u := cb.s, cb.s.f.Tree, cb.u
	x, d := cb.ownSpan(blk)
	for _, k := range cb.path {
		if k == u.i {
			cb.uLo[k], cb.uHi[k] = x.lo, x.hi
			continue
		}
		l, h := s.blockRange(k, blk, cb.samples)
		cb.uLo[k], cb.uHi[k] = l+d.lo, h+d.hi
	}
	if !cb.effectiveSpan(x.lo) {
		return false
	}
	f := u.i
	if t.usesParent(u.i) {
		f = t.fsParent[u.i]
	}
	fLo := ClassicFactor(cb.ueHi[f]*(1+1e-9), cb.now[f].NormShares, cb.damp)
	fHi := ClassicFactor(cb.ueLo[f]*(1-1e-9), cb.now[f].NormShares, cb.damp)
	if rising {
		return fHi < cb.thr*(1-1e-9)
	}
	return fLo >= cb.thr*(1+1e-9)
}

// ownSpan bounds u's own usage plus δ (x), and δ (d), over block blk:
// their values at the block's ends and at u's breaks inside, and the
// pass before each break.
func (cb *classicBlocks) ownSpan(blk int) (x, d span) {
	s, u, p := cb.s, cb.u, cb.s.f.Passes
	a := 1 + blk*skipBlock
	b := min(a+skipBlock, len(cb.samples)) - 1
	qa, qb := p.LastPass(cb.samples[a]), p.LastPass(cb.samples[b])
	x, d = emptySpan(), emptySpan()
	point := func(q float64) {
		m := s.at(q)
		dq := u.delta(m)
		xq := s.usage(u.i, &m) + dq
		x.add(xq)
		d.add(dq)
	}
	point(qa)
	point(qb)
	brk := cb.brk
	k, _ := slices.BinarySearch(brk, qa)
	for ; k < len(brk) && brk[k] <= qb; k++ {
		point(brk[k])
		if brk[k]-p.Period >= qa {
			point(brk[k] - p.Period)
		}
	}
	return x, d
}

// effectiveSpan bounds the effective usage of each association on the
// path from root down, from uLo and uHi (xLo is u's lowest usage): false
// where the bounds do not hold (root's usage not above 0, u's below 0,
// or a weight outside [0,1], where it is not monotone in both).
func (cb *classicBlocks) effectiveSpan(xLo float64) bool {
	t := cb.s.f.Tree
	rLo, rHi := cb.uLo[t.root], cb.uHi[t.root]
	if !(rLo > 0) || xLo < 0 {
		return false
	}
	cb.ueLo[t.root], cb.ueHi[t.root] = 1, 1
	for k := len(cb.path) - 2; k >= 0; k-- {
		d := cb.path[k]
		if w := t.shares[d] / t.levelShares[d]; t.fsParent[d] != t.root && !t.usesParent(d) && t.levelShares[d] != 0 && !(w >= 0 && w <= 1) {
			return false // not monotone in both
		}
		nLo, nHi := normUsage(math.Max(cb.uLo[d], 0), rHi), normUsage(cb.uHi[d], rLo)
		cb.ueLo[d] = t.effectiveUsage(d, nLo, cb.ueLo[t.fsParent[d]])
		cb.ueHi[d] = t.effectiveUsage(d, nHi, cb.ueHi[t.fsParent[d]])
	}
	return true
}

// blockRange is the lowest and highest usage of association d at the
// samples of block blk (classicSkip), kept.
func (s *sharedScenario) blockRange(d int32, blk int, samples []float64) (float64, float64) {
	if s.blocks == nil {
		s.blocks = make([][][2]float64, s.f.Tree.Len())
	}
	r := s.blocks[d]
	if r == nil {
		nb := (len(samples) - 1 + skipBlock - 1) / skipBlock
		r = make([][2]float64, nb)
		for n := range r {
			r[n] = [2]float64{math.Inf(1), math.Inf(-1)}
		}
		for j := 1; j < len(samples); j++ {
			m := s.at(s.f.Passes.LastPass(samples[j]))
			v := s.usage(d, &m)
			x := &r[(j-1)/skipBlock]
			x[0], x[1] = math.Min(x[0], v), math.Max(x[1], v)
		}
		s.blocks[d] = r
	}
	return r[blk][0], r[blk][1]
}

// sharedScenario is Recovery's: every association at the larger of its
// rate and its running jobs' billing, as Quiet has the others.
type sharedScenario struct {
	f       *Forecast
	last    float64   // the last pass at or before At
	subRate []float64 // rates summed over subtrees
	// steps are every association's running jobs above its rate
	// (Forecast.committed); sub[k] those of k's subtree, by index
	steps []RateStep
	sub   [][]int32
	// memo keeps the steps' usage of associations with many of them
	// (root, accounts), which every user below asks for at the same
	// samples, by pass from last on (NaN: not yet)
	memo [][]float64
	// sums are the steps of the subtrees memo keeps, in closed form
	sums []*stepSums
	// subBrk are subBreaks by association (nil: not yet), up to endPass
	subBrk  [][]float64
	endPass float64
	// blocks are blockRange's, by association
	blocks [][][2]float64
	// pairs are the comparisons of sibling accounts without δ
	pairs map[[2]int32]*pairRuns
	// starts are the runs of samples between breaks
	starts []int
	// ownDelta keeps the current user's δ by pass, where ownGen is gen
	ownDelta []float64
	ownGen   []int32
	gen      int32
	// breaks are the passes where a step's closed form changes
	breaks []float64
	// moments by pass from last on (q 0: not yet)
	moments []moment
}

// subBreaks are stepBreaks of the steps of k's subtree.
func (s *sharedScenario) subBreaks(k int32) []float64 {
	if len(s.sub[k]) == 0 {
		return nil
	}
	if s.subBrk[k] == nil {
		steps := make([]RateStep, len(s.sub[k]))
		for n, x := range s.sub[k] {
			steps[n] = s.steps[x]
		}
		s.subBrk[k] = s.stepBreaks(steps, s.endPass)
	}
	return s.subBrk[k]
}

// stepBreaks are the passes after last up to endPass where one of steps
// starts or ends being charged (its partial intervals on either side).
func (s *sharedScenario) stepBreaks(steps []RateStep, endPass float64) []float64 {
	p := s.f.Passes
	out := []float64{}
	add := func(q float64) {
		if q > s.last && q <= endPass {
			out = append(out, q)
		}
	}
	for _, st := range steps {
		add(p.LastPass(st.From) + p.Period)
		if !math.IsInf(st.To, 1) {
			add(p.LastPass(st.To))
			add(p.LastPass(st.To) + p.Period)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stepUsage is what the steps of k's subtree add to its usage at m.
func (s *sharedScenario) stepUsage(k int32, m *moment) float64 {
	if len(s.sub[k]) == 0 {
		return 0
	}
	if s.f.Tree.isUser(k) || m.idx < 0 || m.idx >= len(s.moments) {
		return s.stepSum(k, m)
	}
	memo := s.memo[k]
	if memo == nil {
		memo = make([]float64, len(s.moments))
		for n := range memo {
			memo[n] = math.NaN()
		}
		s.memo[k] = memo
	}
	if v := memo[m.idx]; !math.IsNaN(v) {
		return v
	}
	v := s.stepSum(k, m)
	memo[m.idx] = v
	return v
}

// stepSums are the steps of a subtree in closed form at a pass q: a
// step that ended at or before q (To <= q) is some W·d^(q−last), summed
// over the steps by end (prefix sums); one still charged at q is its
// rate times a unit rate's usage from its From (Passes.BucketUsage, the
// moment's unit from last), summed by From over the steps by end
// (suffix sums).
type stepSums struct {
	ends []float64 // To, sorted
	done []float64 // done[n]: W summed over ends[:n]
	from []fromSums
}

type fromSums struct {
	from float64
	ends []float64 // To of the steps from from, sorted
	rate []float64 // rate[n]: rates summed over ends[n:]
}

func (s *sharedScenario) stepSum(k int32, m *moment) float64 {
	p := s.f.Passes
	q := m.pass
	ss := s.sums[k]
	if ss == nil {
		ss = &stepSums{}
		type st struct{ from, to, rate, w float64 }
		var all []st
		for _, n := range s.sub[k] {
			x := s.steps[n]
			from := math.Max(x.From, s.last)
			w := 0.0
			if !math.IsInf(x.To, 1) && x.To > from {
				r := p.LastPass(x.To) + p.Period
				w = x.Rate * p.BucketUsage(from, x.To, r, x.To-from) / p.pow(r-s.last)
			}
			all = append(all, st{from, x.To, x.Rate, w})
		}
		slices.SortFunc(all, func(a, b st) int { return cmp.Compare(a.to, b.to) })
		ss.done = make([]float64, len(all)+1)
		byFrom := map[float64]*fromSums{}
		for n, x := range all {
			ss.ends = append(ss.ends, x.to)
			ss.done[n+1] = ss.done[n] + x.w
			g := byFrom[x.from]
			if g == nil {
				g = &fromSums{from: x.from}
				byFrom[x.from] = g
			}
			g.ends = append(g.ends, x.to)
			g.rate = append(g.rate, x.rate)
		}
		for _, g := range byFrom {
			g.rate = append(g.rate, 0)
			for n := len(g.rate) - 2; n >= 0; n-- {
				g.rate[n] += g.rate[n+1]
			}
			ss.from = append(ss.from, *g)
		}
		slices.SortFunc(ss.from, func(a, b fromSums) int { return cmp.Compare(a.from, b.from) })
		s.sums[k] = ss
	}
	// ended: To <= q
	n, _ := slices.BinarySearchFunc(ss.ends, q, func(e, q float64) int {
		if e <= q {
			return -1
		}
		return 1
	})
	v := ss.done[n] * m.decay
	for _, g := range ss.from {
		if g.from >= q {
			break
		}
		n, _ := slices.BinarySearchFunc(g.ends, q, func(e, q float64) int {
			if e <= q {
				return -1
			}
			return 1
		})
		switch r := g.rate[n]; {
		case r == 0:
		case g.from == s.last:
			v += r * m.unit
		default:
			v += r * p.BucketUsage(g.from, q, q, q-g.from)
		}
	}
	return v
}

// moment is the shared scenario at q: association k's usage is
// raw·decay + subRate·unit + its steps'; pass is the last pass at or
// before q, idx its index from last.
type moment struct {
	q, pass, decay, unit float64
	idx                  int
}

func (s *sharedScenario) at(q float64) moment {
	p := s.f.Passes
	q = math.Max(q, s.last)
	// decay and unit are those of the last pass at or before q, the
	// same for every association and user: kept for each pass
	pass := p.LastPass(q)
	k := int(math.Round((pass - s.last) / p.Period))
	if k < len(s.moments) {
		if m := s.moments[k]; m.q != 0 {
			m.q = q
			return m
		}
	}
	m := moment{q, pass, p.pow(pass - s.last), p.BucketUsage(s.last, q, q, q-s.last), k}
	if k < len(s.moments) {
		s.moments[k] = m
	}
	return m
}

func (s *sharedScenario) usage(k int32, m *moment) float64 {
	v := s.f.Tree.raw[k]*m.decay + s.subRate[k]*m.unit
	if len(s.sub[k]) == 0 {
		return v
	}
	return v + s.stepUsage(k, m)
}

// recoveryUser is user i under Quiet(i) against the shared scenario.
type recoveryUser struct {
	s    *sharedScenario
	i    int32
	jobs []RunningJob
	// horizon is the last pass looked at
	horizon float64
	// breaks are the passes after At up to the horizon's where δ's
	// closed form may change: the first charge, and each job's first
	// charge and its end (a partial interval on either side).
	breaks []float64
	// own are those of breaks that are not the shared scenario's
	own []float64
}

func (s *sharedScenario) user(i int32, jobs []RunningJob, endPass float64) *recoveryUser {
	p := s.f.Passes
	u := &recoveryUser{s: s, i: i, jobs: jobs, horizon: endPass}
	if s.ownDelta == nil {
		s.ownDelta, s.ownGen = make([]float64, len(s.moments)), make([]int32, len(s.moments))
	}
	s.gen++
	add := func(q float64) {
		if q > s.last && q <= endPass {
			u.breaks = append(u.breaks, q)
		}
	}
	add(s.last + p.Period)
	for _, j := range jobs {
		add(p.LastPass(j.Start) + p.Period)
		if !math.IsInf(j.End, 1) {
			add(p.LastPass(j.End))
			add(p.LastPass(j.End) + p.Period)
		}
	}
	slices.Sort(u.breaks)
	u.breaks = slices.Compact(u.breaks)
	u.own = u.breaks
	u.breaks = slices.Concat(u.own, s.breaks)
	slices.Sort(u.breaks)
	u.breaks = slices.Compact(u.breaks)
	return u
}

// delta is δ at m: i's running jobs' charge less its rate's and its
// steps'.
func (u *recoveryUser) delta(m moment) float64 {
	s := u.s
	idx := m.idx
	cached := idx >= 0 && idx < len(s.moments) && (len(u.jobs) > 0 || len(s.sub[u.i]) > 0)
	if cached && s.ownGen[idx] == s.gen {
		return s.ownDelta[idx]
	}
	d := -s.subRate[u.i]*m.unit - s.stepUsage(u.i, &m)
	for _, j := range u.jobs {
		d += s.f.jobUsage(j, s.last, m.q)
	}
	if cached {
		s.ownGen[idx], s.ownDelta[idx] = s.gen, d
	}
	return d
}

// classicShifted is user i's classic values when i and each of its
// ancestors use delta more than usage gives, everyone else as usage
// gives: the path from root down, as classic computes it. norm holds the
// NormShares, which usage does not change; ue and path are scratch.
func (t *Tree) classicShifted(i int32, usage func(int32) float64, delta float64, norm []Values, damp float64, ue []float64, path *[]int32) Values {
	if damp <= 0 {
		damp = 1
	}
	p := (*path)[:0]
	for d := i; d >= 0; d = t.parent[d] {
		p = append(p, d)
	}
	*path = p
	rootRaw := usage(t.root) + delta
	ue[t.root] = 1
	v := Values{LevelFS: blank}
	for k := len(p) - 2; k >= 0; k-- {
		d := p[k]
		raw := usage(d) + delta
		un := normUsage(raw, rootRaw)
		ue[d] = t.effectiveUsage(d, un, ue[t.fsParent[d]])
		if d == i {
			v.RawUsage, v.NormUsage, v.EffectiveUsage = raw, un, ue[d]
		}
	}
	v.NormShares = norm[i].NormShares
	f := i
	if t.usesParent(i) {
		f = t.fsParent[i]
	}
	v.FairShare = ClassicFactor(ue[f], norm[f].NormShares, damp)
	return v
}

// rankView is a Fair Tree ranking of usage raw, made to rank one user
// again when its usage, and so its ancestors', moves by some δ while
// everyone else's stays: the siblings of each fs parent sorted by level,
// with the users after each in that order.
type rankView struct {
	t     *Tree
	raw   []float64
	vals  []Values
	level []float64
	count []int32
	// sorted[kidStart[p]:kidStart[p+1]] are p's children by level, and
	// after[kidStart[p]+p+k] the users of sorted[kidStart[p]+k:] (one
	// more slot per group: none)
	sorted []rankEdge
	after  []int32
}

// rankView ranks raw; count is walkUsers.
func (t *Tree) rankView(raw []float64, count []int32) *rankView {
	vals, level := t.fairTreeLevels(raw)
	v := &rankView{t: t, raw: raw, vals: vals, level: level, count: count, sorted: make([]rankEdge, len(t.kids)), after: make([]int32, len(t.kids)+len(t.assocs))}
	for p := range t.assocs {
		lo, hi := t.kidStart[p], t.kidStart[p+1]
		if lo == hi {
			continue
		}
		g := v.sorted[lo:hi]
		for k, c := range t.kids[lo:hi] {
			g[k] = rankEdge{level[c], count[c]}
		}
		slices.SortFunc(g, func(x, y rankEdge) int { return cmp.Compare(x.v, y.v) })
		suffixUsers(v.after[int(lo)+p:int(lo)+p], g) // in its slots
	}
	return v
}

// shifted is association c's level against its siblings' levels in the
// view when c and its ancestors use delta more (Tree.shiftedLevel).
func (v *rankView) shifted(c int32, delta float64) float64 {
	return v.t.shiftedLevel(c, v.vals[c].NormShares, v.level[c], v.raw[v.t.fsParent[c]], v.raw[c], delta)
}

// shiftedLevel is association c's level against its siblings' levels
// when c and its ancestors use delta more than raw, its fs parent's
// rawP: NormShares·P/(u+δ). Its true LevelFS is that times (P+δ)/P, and
// so is each sibling's, whose usage stays while their parent's moves by
// δ: the common factor does not change the order. level is c's own at
// raw, kept where it does not follow usage.
func (t *Tree) shiftedLevel(c int32, ns, level, rawP, raw, delta float64) float64 {
	switch {
	case t.kind[c] == kindParent|kindUser, t.kind[c] == kindParent, ns == 0:
		return level
	}
	return ns * rawP / (raw + delta)
}

// values are user i's Fair Tree values when it and its ancestors use
// delta more: its rank is the users ranked after it, the users of every
// sibling below each association on its path. An exact tie counts the
// sibling as after (Slurm keeps sibling order and may share a rank).
func (v *rankView) values(i int32, delta float64) Values {
	t := v.t
	before := int32(0)
	for c := i; c != t.root; c = t.fsParent[c] {
		p := t.fsParent[c]
		l := v.shifted(c, delta)
		lo, hi := t.kidStart[p], t.kidStart[p+1]
		g := v.sorted[lo:hi]
		n := v.after[int(lo)+int(p)+firstAbove(g, l)]
		if v.level[c] > l {
			n -= v.count[c] // c itself, at its level in the view
		}
		before += n
	}
	return t.shiftedValues(v.vals[i], i, v.raw[i], v.raw[t.fsParent[i]], v.raw[t.root], delta, int32(t.users)-before)
}

// shiftedValues are user i's Fair Tree values out (at usage raw, its fs
// parent's rawP, root's rawRoot) when it and its ancestors use delta
// more, and its rank is rank.
func (t *Tree) shiftedValues(out Values, i int32, raw, rawP, rawRoot, delta float64, rank int32) Values {
	out.RawUsage = raw + delta
	out.NormUsage = normUsage(out.RawUsage, rawRoot+delta)
	if p := rawP + delta; p != 0 {
		out.EffectiveUsage = out.RawUsage / p
	}
	if t.kind[i] == kindUser && out.NormShares != 0 {
		out.LevelFS = out.NormShares / out.EffectiveUsage
	}
	out.Rank = rank
	out.RankMin, out.RankMax = out.Rank, out.Rank
	out.FairShare = float64(out.Rank) / float64(t.users)
	return out
}

// fairRanks is user i's Fair Tree rank under Quiet(i) over time, from
// one comparison with each sibling (that has users) of each association
// on its path, as rankView.values compares: a sibling whose level is
// above the path association's is ranked after it. The siblings' usage
// is the shared scenario's, a + b·x, and so is the path association's
// between two breaks, so a comparison's sign changes at most once
// there; where it does, bisection over the passes finds where. The
// rank is constant between the passes in breaks.
type fairRanks struct {
	u       *recoveryUser
	base    Values
	before0 int32
	// events, by pass: the users ranked after i change by d from q on;
	// sum is d summed up to and including each
	events []rankEvent
	breaks []float64
}

type rankEvent struct {
	q      float64
	d, sum int32
}

// fairRanks of u; now are the values at At, count walkUsers. A
// comparison of c with a sibling sib, ns_sib·(u_c+δ) against ns_c·u_sib
// (their parent's usage is common to both levels), changes its closed
// form only at u's own breaks and at the steps' breaks of c's and sib's
// subtrees: its runs are those, not every step's.
func (u *recoveryUser) fairRanks(now []Values, count []int32) *fairRanks {
	s := u.s
	t := s.f.Tree
	w := rankWalk{u: u, now: now, count: count, r: &fairRanks{u: u, base: now[u.i]}}
	w.ownEnds = u.runEnds(u.own)
	// dMax bounds |δ| over the horizon: δ is monotone between the breaks
	// of u and of i's steps, the runs of the first level
	w.iEnds = w.ownEnds
	if sb := s.subBreaks(u.i); len(sb) > 0 {
		w.iEnds = u.runEnds(mergeSorted(u.own, sb))
	}
	for _, e := range w.iEnds {
		w.dMax = math.Max(w.dMax, math.Max(math.Abs(e[0].delta), math.Abs(e[1].delta)))
	}
	for c := u.i; c != t.root; c = t.fsParent[c] {
		w.siblings(c)
	}
	w.r.sumEvents()
	return w.r
}

// sumEvents orders the events by pass and sums them up: the rank, and
// so the factor, changes only at the events.
func (r *fairRanks) sumEvents() {
	slices.SortFunc(r.events, func(x, y rankEvent) int { return cmp.Compare(x.q, y.q) })
	sum := int32(0)
	for k := range r.events {
		sum += r.events[k].d
		r.events[k].sum = sum
		r.breaks = append(r.breaks, r.events[k].q)
	}
}

// runEnd is one end of a run of passes: the shared scenario there and δ.
type runEnd struct {
	m     moment
	delta float64
}

// ends are the ends of the run of passes from a to b.
func (u *recoveryUser) ends(a, b float64) [2]runEnd {
	ma, mb := u.s.at(a), u.s.at(b)
	return [2]runEnd{{ma, u.delta(ma)}, {mb, u.delta(mb)}}
}

// runEnds are the ends of each run of passes between breaks, the first
// from At.
func (u *recoveryUser) runEnds(breaks []float64) [][2]runEnd {
	s := u.s
	out := make([][2]runEnd, len(breaks)+1)
	for k := range out {
		a, b := runSpan(breaks, k, s.f.At, u.horizon, s.f.Passes.Period)
		out[k] = u.ends(a, b)
	}
	return out
}

// rankWalk is fairRanks' walk up user u's path: at each association c on
// it, c's level compared with that of each sibling that has users.
type rankWalk struct {
	u     *recoveryUser
	now   []Values
	count []int32
	r     *fairRanks
	// ownEnds are the runs between u's own breaks, iEnds those between
	// u's and its steps' breaks; dMax bounds |δ| over the horizon
	ownEnds, iEnds [][2]runEnd
	dMax           float64
	buf            [2][][2]levelSide // levels' scratch
}

// levelSide is c's level and its fs parent's usage at a moment, the same
// for each sibling.
type levelSide struct{ l, rawP float64 }

func (w *rankWalk) level(c int32, m *moment, delta float64) levelSide {
	s, t, now := w.u.s, w.u.s.f.Tree, w.now
	rawP, rawC := s.usage(t.fsParent[c], m), s.usage(c, m)
	return levelSide{t.shiftedLevel(c, now[c].NormShares, t.levelFS(c, now[c].NormShares, rawC, rawP), rawP, rawC, delta), rawP}
}

// levelPair is c's level at both ends of a run.
func (w *rankWalk) levelPair(c int32, e *[2]runEnd) [2]levelSide {
	return [2]levelSide{w.level(c, &e[0].m, e[0].delta), w.level(c, &e[1].m, e[1].delta)}
}

// levels are c's levels at the ends of each run, in scratch buffer b.
func (w *rankWalk) levels(c int32, ends [][2]runEnd, b int) [][2]levelSide {
	out := slices.Grow(w.buf[b][:0], len(ends))[:len(ends)]
	w.buf[b] = out
	for k := range ends {
		out[k] = w.levelPair(c, &ends[k])
	}
	return out
}

// above says whether sib's level at m is above c's, c as level gives it.
func (w *rankWalk) above(sib int32, m *moment, c levelSide) bool {
	s := w.u.s
	return s.f.Tree.levelFS(sib, w.now[sib].NormShares, s.usage(sib, m), c.rawP) > c.l
}

// after says whether sib is ranked after i at m, where i's usage is
// delta more than the shared scenario's.
func (w *rankWalk) after(c, sib int32, m *moment, delta float64) bool {
	return w.above(sib, m, w.level(c, m, delta))
}

// pathLevel is c's runs, made once for all of c's siblings: their
// breaks, the ends of the runs and c's levels there (nil: not yet).
type pathLevel struct {
	breaks []float64
	ends   [][2]runEnd
	levels [][2]levelSide
}

// siblings compares c with each of its siblings that have users: over
// the runs of the pair without δ where the steps make many (viaPair),
// else at the ends of every run of c's and the sibling's breaks
// (viaRuns).
func (w *rankWalk) siblings(c int32) {
	u := w.u
	s, t := u.s, u.s.f.Tree
	par := t.fsParent[c]
	pl := pathLevel{breaks: u.own, ends: w.ownEnds}
	if sb := s.subBreaks(c); len(sb) > 0 {
		pl.breaks = mergeSorted(u.own, sb)
		pl.ends = nil
		if c == u.i {
			pl.ends = w.iEnds
		}
	}
	for _, sib := range t.kids[t.kidStart[par]:t.kidStart[par+1]] {
		if sib == c || w.count[sib] == 0 {
			continue
		}
		x := sibling{w: w, c: c, sib: sib}
		if c != u.i && len(s.subBreaks(c))+len(s.subBreaks(sib)) > 16 && s.plainLevel(c, w.now) && s.plainLevel(sib, w.now) {
			x.viaPair()
		} else {
			x.viaRuns(&pl)
		}
	}
}

// sibling is the comparison of path association c with its sibling sib
// over the horizon; cur: sib is ranked after i at the pass at hand.
type sibling struct {
	w      *rankWalk
	c, sib int32
	cur    bool
}

// start sets the comparison at At.
func (x *sibling) start(after bool) {
	x.cur = after
	if after {
		x.w.r.before0 += x.w.count[x.sib]
	}
}

// flip records that from q on the comparison is to.
func (x *sibling) flip(q float64, to bool) {
	d := x.w.count[x.sib]
	if !to {
		d = -d
	}
	x.w.r.events = append(x.w.r.events, rankEvent{q: q, d: d})
	x.cur = to
}

// run compares at the ends of one run and bisects where the comparison
// changes.
func (x *sibling) run(e *[2]runEnd, lv [2]levelSide) {
	w := x.w
	s, p := w.u.s, w.u.s.f.Passes
	if a := w.above(x.sib, &e[0].m, lv[0]); a != x.cur {
		x.flip(e[0].m.q, a)
	}
	if b := w.above(x.sib, &e[1].m, lv[1]); b != x.cur {
		lo, hi := p.LastPass(e[0].m.q), e[1].m.q
		for hi-lo > p.Period*1.5 {
			mid := lo + math.Floor((hi-lo)/p.Period/2)*p.Period
			if m := s.at(mid); w.after(x.c, x.sib, &m, w.u.delta(m)) == x.cur {
				lo = mid
			} else {
				hi = mid
			}
		}
		x.flip(hi, b)
	}
}

// viaRuns compares at the ends of each run between c's and sib's
// breaks.
func (x *sibling) viaRuns(pl *pathLevel) {
	w := x.w
	u := w.u
	if pl.ends == nil {
		pl.ends = u.runEnds(pl.breaks)
	}
	if pl.levels == nil {
		pl.levels = slices.Clone(w.levels(x.c, pl.ends, 0))
	}
	ends, lv := pl.ends, pl.levels
	if sb := u.s.subBreaks(x.sib); len(sb) > 0 {
		ends = u.runEnds(mergeSorted(pl.breaks, sb))
		lv = w.levels(x.c, ends, 1)
	}
	x.start(w.above(x.sib, &ends[0][0].m, lv[0][0]))
	for k := range ends {
		x.run(&ends[k], lv[k])
	}
}

// viaPair compares over the runs of the pair without δ
// (sharedScenario.pair), where the steps make many runs: a run whose
// comparison without δ stays farther from 0 than ns_sib·dMax, and c's
// usage above dMax, keeps its sign under any δ: no need to look. The
// others are compared run by run of u's own breaks inside (ownRuns).
func (x *sibling) viaPair() {
	w := x.w
	s := w.u.s
	pr := s.pair(x.c, x.sib, w.now)
	thr := w.now[x.sib].NormShares * w.dMax
	for j := range pr.runs {
		r := &pr.runs[j]
		sure := r.minAbs > thr*(1+1e-9) && r.minUc > w.dMax*(1+1e-9)
		if j == 0 {
			if sure {
				x.start(r.pos)
			} else {
				m := s.at(s.f.At)
				x.start(w.after(x.c, x.sib, &m, w.u.delta(m)))
			}
		}
		if sure {
			if r.pos != x.cur {
				x.flip(r.from, r.pos)
			}
			continue
		}
		x.ownRuns(pr, j)
	}
}

// ownRuns compares over the pair's run j split at u's own breaks inside
// it.
func (x *sibling) ownRuns(pr *pairRuns, j int) {
	u := x.w.u
	p := u.s.f.Passes
	from := pr.runs[j].from
	next := u.horizon + p.Period
	if j+1 < len(pr.runs) {
		next = pr.runs[j+1].from
	}
	starts := []float64{from}
	k, _ := slices.BinarySearch(u.own, from)
	for ; k < len(u.own) && u.own[k] < next; k++ {
		if u.own[k] > from {
			starts = append(starts, u.own[k])
		}
	}
	for n, a := range starts {
		b := u.horizon
		switch {
		case n+1 < len(starts):
			b = starts[n+1] - p.Period
		case j+1 < len(pr.runs):
			b = next - p.Period
		}
		e := u.ends(a, math.Max(b, a))
		x.run(&e, x.w.levelPair(x.c, &e))
	}
}

// plainLevel: k's level is NormShares·P/usage with NormShares > 0 (not
// FairShare=parent, not zero shares).
func (s *sharedScenario) plainLevel(k int32, now []Values) bool {
	return s.f.Tree.kind[k]&kindParent == 0 && now[k].NormShares > 0
}

// pairRuns are the comparison of c with its sibling sib without δ,
// ns_sib·u_c − ns_c·u_sib, over the runs between the breaks of both
// subtrees' steps and the first charge: in each it is monotone, so its
// smallest magnitude and c's smallest usage are at the run's ends.
type pairRuns struct{ runs []pairRun }

type pairRun struct {
	from          float64 // the run's first pass (At for the first)
	minAbs, minUc float64
	pos           bool // the comparison is > 0
}

func (s *sharedScenario) pair(c, sib int32, now []Values) *pairRuns {
	key := [2]int32{c, sib}
	if pr, ok := s.pairs[key]; ok {
		return pr
	}
	p := s.f.Passes
	breaks := mergeSorted(s.subBreaks(c), s.subBreaks(sib))
	if q := s.last + p.Period; q <= s.endPass && !slices.Contains(breaks, q) {
		breaks = mergeSorted(breaks, []float64{q})
	}
	nsC, nsS := now[c].NormShares, now[sib].NormShares
	pr := &pairRuns{runs: make([]pairRun, len(breaks)+1)}
	for k := range pr.runs {
		a, b := runSpan(breaks, k, s.f.At, s.endPass, p.Period)
		ma, mb := s.at(a), s.at(b)
		ga := nsS*s.usage(c, &ma) - nsC*s.usage(sib, &ma)
		gb := nsS*s.usage(c, &mb) - nsC*s.usage(sib, &mb)
		x := pairRun{from: ma.q, pos: ga > 0, minUc: math.Min(s.usage(c, &ma), s.usage(c, &mb))}
		if (ga > 0) == (gb > 0) && ga != 0 && gb != 0 {
			x.minAbs = math.Min(math.Abs(ga), math.Abs(gb))
			// what rounding may hide
			x.minAbs -= 1e-9 * (nsS*math.Max(s.usage(c, &ma), s.usage(c, &mb)) + nsC*math.Max(s.usage(sib, &ma), s.usage(sib, &mb)))
		}
		pr.runs[k] = x
	}
	s.pairs[key] = pr
	return pr
}

// value is user i's Fair Tree values at pass q.
func (r *fairRanks) value(q float64) Values {
	s, t, i := r.u.s, r.u.s.f.Tree, r.u.i
	before := r.before0
	if k, _ := slices.BinarySearchFunc(r.events, q, func(e rankEvent, q float64) int {
		if e.q <= q {
			return -1
		}
		return 1
	}); k > 0 {
		before += r.events[k-1].sum
	}
	m := s.at(q)
	return t.shiftedValues(r.base, i, s.usage(i, &m), s.usage(t.fsParent[i], &m), s.usage(t.root, &m), r.u.delta(m), int32(t.users)-before)
}

// FairLevels are FairLevel's factors of users, computed together: under
// Fair Tree each user's usage moves to LevelFS 1 along its own path
// (rankView), exact but for ties.
func (t *Tree) FairLevels(users []int, alg Algorithm, dampening float64) ([]float64, error) {
	out := make([]float64, len(users))
	if alg != AlgorithmFairTree {
		if _, err := t.Compute(alg, dampening); err != nil {
			return nil, err
		}
		if dampening <= 0 {
			dampening = 1
		}
		for k := range out {
			out[k] = ClassicFactor(1, 1, dampening)
		}
		return out, nil
	}
	v := t.rankView(t.raw, t.walkUsers())
	ft := t.FairTree()
	for k, i := range users {
		shift, ok := t.fairShift(int32(i))
		if !ok {
			out[k] = ft[i].FairShare
			continue
		}
		out[k] = v.values(int32(i), shift).FairShare
	}
	return out, nil
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
