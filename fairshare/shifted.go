package fairshare

import (
	"cmp"
	"slices"
)

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
