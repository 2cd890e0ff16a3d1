package fairshare

import "math"

// depthObliviousF is the constant f of _depth_oblivious_set_usage_efctv; Slurm
// fixes it in the code.
const depthObliviousF = 5.0

// ClassicOptions select the variants of the classic algorithm
// (PriorityFlags=NO_FAIR_TREE).
type ClassicOptions struct {
	// Dampening is FairShareDampeningFactor (slurm.conf, default 1).
	Dampening float64
	// DepthOblivious is PriorityFlags=DEPTH_OBLIVIOUS. Best effort: Slurm
	// sums siblings' normalized usage that it computes lazily for users, so
	// it mixes stale and fresh values that one snapshot cannot reproduce.
	DepthOblivious bool
}

// Classic computes the classic fairshare values of every association, in
// the order given to NewTree, the way slurmctld and sshare (up to 25.05)
// show them: root has NormShares 1, EffectvUsage 1, no NormUsage, and
// FairShare 2^(-1/dampening); there is no LevelFS.
func (t *Tree) Classic(opt ClassicOptions) []Values {
	damp := opt.Dampening
	if damp <= 0 {
		damp = 1
	}
	a := t.assocs
	out := make([]Values, len(a))
	rootRaw := a[t.root].RawUsage
	for i := range a {
		out[i] = Values{
			NormShares: t.classicNormShares(i),
			RawUsage:   a[i].RawUsage,
			NormUsage:  normUsage(a[i].RawUsage, rootRaw),
			LevelFS:    blank,
		}
	}
	r := &out[t.root]
	r.NormShares, r.NormUsage, r.EffectiveUsage = 1, blank, 1

	// Effective usage top-down (_set_assoc_usage_efctv): each case in the
	// order Slurm checks them.
	for _, i := range t.order[1:] {
		p := t.fsParent[i]
		v := &out[i]
		switch {
		case p == t.root:
			v.EffectiveUsage = v.NormUsage
		case a[i].UsesParent():
			v.EffectiveUsage = out[p].EffectiveUsage
		case opt.DepthOblivious:
			v.EffectiveUsage = t.depthObliviousUsage(out, i)
		case t.levelShares[i] == 0:
			v.EffectiveUsage = out[p].EffectiveUsage
		default:
			v.EffectiveUsage = v.NormUsage +
				(out[p].EffectiveUsage-v.NormUsage)*(float64(a[i].Shares)/t.levelShares[i])
		}
	}

	// priority_p_calc_fs_factor; FairShare=parent rows take their fs
	// parent's usage and shares.
	for i := range out {
		f := i
		if a[i].UsesParent() && i != int(t.root) {
			f = int(t.fsParent[i])
		}
		out[i].FairShare = classicFactor(out[f].EffectiveUsage, out[f].NormShares, damp)
	}
	return out
}

func classicFactor(ue, sn, damp float64) float64 {
	if sn <= 0 {
		return 0
	}
	return math.Exp2(-(ue / sn) / damp)
}

// classicNormShares is _normalize_assoc_shares_traditional (assoc_mgr.c): the
// product of shares/level_shares from the association up to, not including,
// root, skipping FairShare=parent levels; FairShare=parent itself takes its
// fs parent's value. Multiplied leaf-first, as Slurm does.
func (t *Tree) classicNormShares(i int) float64 {
	a := t.assocs
	if int32(i) == t.root {
		return 1
	}
	if a[i].UsesParent() {
		return t.classicNormShares(int(t.fsParent[i]))
	}
	sn := 1.0
	for x := int32(i); x != t.root; x = int32(a[x].Parent) {
		if a[x].UsesParent() {
			continue
		}
		if t.levelShares[x] == 0 {
			return 0
		}
		sn = sn * float64(a[x].Shares) / t.levelShares[x]
	}
	return sn
}

// depthObliviousUsage is _depth_oblivious_set_usage_efctv.
func (t *Tree) depthObliviousUsage(out []Values, i int32) float64 {
	p := t.fsParent[i]
	sn, un := out[i].NormShares, out[i].NormUsage
	snP, ueP := out[p].NormShares, out[p].EffectiveUsage
	if sn == 0 || snP == 0 || ueP == 0 || un == 0 {
		return un
	}
	ratioP := ueP / snP
	ratioS := 0.0
	for _, s := range t.kids[t.kidStart[p]:t.kidStart[p+1]] {
		if !t.assocs[s].UsesParent() {
			ratioS += out[s].NormUsage
		}
	}
	ratioS /= snP
	ratioL := (un / sn) / ratioS
	k := 1.0
	if ratioP != 0 && ratioL != 0 && math.Log(ratioP)*math.Log(ratioL) < 0 {
		k = 1 / (1 + math.Pow(depthObliviousF*math.Log(ratioP), 2))
	}
	return ratioP * math.Pow(ratioL, k) * sn
}
