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

// UsageBounds says how far each computed value can move when the raw
// usage of association i is known only to within usageErr + extra[i]
// (extra may be nil). sshare truncates RawUsage to an integer (usageErr 1);
// extra is what else is unknown of each association's usage, such as the
// charge of its running jobs between two possible decay passes. It
// propagates that error through the algorithm's formulas to first order,
// per value; +Inf where a value cannot be pinned down (a denominator below
// its error), 0 where usage does not enter. FairShare of Fair Tree is a
// rank: its bound is the rank range that other orders of tied sibling
// accounts allow (Values.RankMin/RankMax; RankIntervals widens it by the
// usage error).
func (t *Tree) UsageBounds(alg Algorithm, vals []Values, usageErr float64, extra []float64, dampening float64) []Values {
	if dampening <= 0 {
		dampening = 1
	}
	a := t.assocs
	out := make([]Values, len(a))
	errOf := func(i int32) float64 {
		if extra == nil {
			return usageErr
		}
		return usageErr + extra[i]
	}
	rootRaw := a[t.root].RawUsage
	inf := math.Inf(1)
	// ratioErr bounds x/y for x, y known to within ex, ey.
	ratioErr := func(x, y, ex, ey float64) float64 {
		switch {
		case ex == 0 && ey == 0:
			return 0
		case y < ey || y == 0:
			return inf
		}
		return (ex + ey*x/y) / y
	}
	rootErr := errOf(t.root)
	for i := range a {
		out[i].NormUsage = ratioErr(a[i].RawUsage, rootRaw, errOf(int32(i)), rootErr)
	}
	out[t.root].NormUsage = 0
	fairTree := alg == AlgorithmFairTree
	for _, i := range t.order[1:] {
		p := t.fsParent[i]
		o := &out[i]
		if fairTree {
			o.FairShare = vals[i].RankSpread(t.users)
			o.EffectiveUsage = ratioErr(a[i].RawUsage, a[p].RawUsage, errOf(i), errOf(p))
			if ue, lfs := vals[i].EffectiveUsage, vals[i].LevelFS; lfs > 0 && !math.IsNaN(lfs) {
				if a[i].RawUsage <= errOf(i) || o.EffectiveUsage*2 >= ue {
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
