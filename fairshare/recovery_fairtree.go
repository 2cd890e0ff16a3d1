package fairshare

import (
	"cmp"
	"math"
	"slices"
)

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
