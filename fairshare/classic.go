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
	return t.classic(nil, opt)
}

// ClassicLagged models what slurmctld shows in classic mode while usage
// grows, given the raw usage at the start of the last decay pass (prevRaw,
// e.g. from the sshare taken just before that pass) and the current raw
// usage in the tree. _decay_thread computes accounts' NormUsage and
// EffectvUsage at the start of each pass, before decay and new usage, and
// resets users' to NO_VAL; a user's values are then computed on demand
// (sshare, or a pending job's priority) from its current usage and its
// account's effective usage of the pass start. RawUsage is current
// everywhere. DepthOblivious is not modelled.
func (t *Tree) ClassicLagged(prevRaw []float64, dampening float64) []Values {
	if dampening <= 0 {
		dampening = 1
	}
	prev := t.classic(prevRaw, ClassicOptions{Dampening: dampening})
	out := t.classic(nil, ClassicOptions{Dampening: dampening})
	for _, i := range t.order {
		if !t.isUser(i) {
			raw := out[i].RawUsage
			out[i] = prev[i]
			out[i].RawUsage = raw
			continue
		}
		p, v := t.fsParent[i], &out[i]
		v.EffectiveUsage = t.effectiveUsage(i, v.NormUsage, prev[p].EffectiveUsage)
		if t.usesParent(i) {
			v.FairShare = ClassicFactor(prev[p].EffectiveUsage, prev[p].NormShares, dampening)
		} else {
			v.FairShare = ClassicFactor(v.EffectiveUsage, v.NormShares, dampening)
		}
	}
	return out
}

// classic computes with raw usage from raw, or from the tree when raw is nil.
func (t *Tree) classic(raw []float64, opt ClassicOptions) []Values {
	damp := opt.Dampening
	if damp <= 0 {
		damp = 1
	}
	a := t.assocs
	if raw == nil {
		raw = t.raw
	}
	out := make([]Values, len(a))
	rootRaw := raw[t.root]
	for i := range a {
		out[i] = Values{RawUsage: raw[i], NormUsage: normUsage(raw[i], rootRaw), LevelFS: blank}
	}
	r := &out[t.root]
	r.NormShares, r.NormUsage, r.EffectiveUsage = 1, blank, 1

	// Top-down, parents first. NormShares is
	// _normalize_assoc_shares_traditional (assoc_mgr.c): the product of
	// shares/level_shares from the association up to, not including, root,
	// skipping FairShare=parent levels, 0 below a level without shares; a
	// FairShare=parent row shows its fs parent's value, which is its
	// parent's product. Slurm multiplies leaf-first; the order only moves
	// the last bit.
	for _, i := range t.order[1:] {
		p := t.fsParent[i]
		v := &out[i]
		switch sn := out[t.parent[i]].NormShares; {
		case t.usesParent(i):
			v.NormShares = sn
		case t.levelShares[i] != 0:
			v.NormShares = sn * t.shares[i] / t.levelShares[i]
		}
		if opt.DepthOblivious && p != t.root && !t.usesParent(i) {
			v.EffectiveUsage = t.depthObliviousUsage(out, i)
		} else {
			v.EffectiveUsage = t.effectiveUsage(i, v.NormUsage, out[p].EffectiveUsage)
		}
	}

	// priority_p_calc_fs_factor; FairShare=parent rows take their fs
	// parent's usage and shares.
	for i := range out {
		f := i
		if t.usesParent(int32(i)) && i != int(t.root) {
			f = int(t.fsParent[i])
		}
		out[i].FairShare = ClassicFactor(out[f].EffectiveUsage, out[f].NormShares, damp)
	}
	return out
}

// effectiveUsage is _set_assoc_usage_efctv and _set_usage_efctv for
// association i (not root) with normalized usage un whose fs parent has
// effective usage ueP, the cases in the order Slurm checks them; under
// DEPTH_OBLIVIOUS its formula takes the place of the last two.
func (t *Tree) effectiveUsage(i int32, un, ueP float64) float64 {
	switch {
	case t.fsParent[i] == t.root:
		return un
	case t.usesParent(i), t.levelShares[i] == 0:
		return ueP
	}
	return un + (ueP-un)*(t.shares[i]/t.levelShares[i])
}

// ClassicFactor is 2^(-UE/S/dampening), 0 for no shares.
func ClassicFactor(ue, sn, damp float64) float64 {
	if sn <= 0 {
		return 0
	}
	return math.Exp2(-(ue / sn) / damp)
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
		if !t.usesParent(s) {
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
