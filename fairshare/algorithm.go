package fairshare

import (
	"fmt"
	"math"
)

// Algorithm names a fairshare algorithm as the exporter's flags, JSON and
// metric labels spell it.
type Algorithm string

const (
	AlgorithmClassic        Algorithm = "classic"
	AlgorithmDepthOblivious Algorithm = "depth_oblivious"
	AlgorithmFairTree       Algorithm = "fair_tree"
)

// Compute runs the algorithm slurmctld runs for these PriorityFlags.
func (t *Tree) Compute(alg Algorithm, dampening float64) ([]Values, error) {
	switch alg {
	case AlgorithmClassic:
		return t.Classic(ClassicOptions{Dampening: dampening}), nil
	case AlgorithmDepthOblivious:
		return t.Classic(ClassicOptions{Dampening: dampening, DepthOblivious: true}), nil
	case AlgorithmFairTree:
		return t.FairTree(), nil
	}
	return nil, fmt.Errorf("algorithm %q: expected classic, depth_oblivious or fair_tree", alg)
}

// UsageBounds says how far each computed value can move when every raw usage
// is known only to within usageErr (sshare truncates RawUsage to an integer:
// usageErr 1). It propagates that error through the algorithm's formulas to
// first order, per value; +Inf where a value cannot be pinned down (a
// denominator below usageErr), 0 where usage does not enter. FairShare of
// Fair Tree is a rank: its bound is the rank range that other orders of
// tied sibling accounts allow (Values.RankMin/RankMax); siblings whose
// LevelFS lie within the usage bound of each other could still swap.
func (t *Tree) UsageBounds(alg Algorithm, vals []Values, usageErr, dampening float64) []Values {
	if dampening <= 0 {
		dampening = 1
	}
	a := t.assocs
	out := make([]Values, len(a))
	rootRaw := a[t.root].RawUsage
	inf := math.Inf(1)
	// ratioErr bounds x/y for x, y each known to within usageErr.
	ratioErr := func(x, y float64) float64 {
		switch {
		case usageErr == 0:
			return 0
		case y < usageErr:
			return inf
		}
		return usageErr * (1 + x/y) / y
	}
	for i := range a {
		out[i].NormUsage = ratioErr(a[i].RawUsage, rootRaw)
	}
	out[t.root].NormUsage = 0
	fairTree := alg == AlgorithmFairTree
	for _, i := range t.order[1:] {
		p := t.fsParent[i]
		o := &out[i]
		if fairTree {
			o.FairShare = vals[i].RankSpread(t.users)
			o.EffectiveUsage = ratioErr(a[i].RawUsage, a[p].RawUsage)
			if ue, lfs := vals[i].EffectiveUsage, vals[i].LevelFS; lfs > 0 && !math.IsNaN(lfs) {
				if a[i].RawUsage < usageErr || o.EffectiveUsage*2 >= ue {
					o.LevelFS = inf
				} else {
					o.LevelFS = lfs * o.EffectiveUsage / ue
				}
			}
			continue
		}
		switch {
		case p == t.root:
			o.EffectiveUsage = o.NormUsage
		case a[i].UsesParent() || t.levelShares[i] == 0:
			o.EffectiveUsage = out[p].EffectiveUsage
		default:
			f := float64(a[i].Shares) / t.levelShares[i]
			o.EffectiveUsage = (1-f)*o.NormUsage + f*out[p].EffectiveUsage
		}
	}
	if !fairTree {
		for i := range out {
			f := i
			if a[i].UsesParent() && i != int(t.root) {
				f = int(t.fsParent[i])
			}
			if sn := vals[f].NormShares; sn > 0 {
				out[i].FairShare = vals[i].FairShare * math.Ln2 * out[f].EffectiveUsage / sn / dampening
			}
		}
	}
	return out
}
