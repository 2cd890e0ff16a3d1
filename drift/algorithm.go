package drift

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// applied infers the algorithm slurmctld applies from its report: a
// LevelFS column is Fair Tree; otherwise classic normalizes shares over
// the whole cluster and Fair Tree among siblings (what slurmctld keeps
// computing from when PriorityFlags change without a restart).
func applied(out *shares.Table, rt *fairshare.Tree, configured fairshare.Algorithm) fairshare.Algorithm {
	if shown := out.Algorithm(); shown == fairshare.AlgorithmFairTree {
		return shown
	}
	global := rt.Classic(fairshare.ClassicOptions{Dampening: 1})
	sibling := rt.FairTree()
	const eps = 2e-6 // sshare's six decimals
	offGlobal, offSibling := 0, 0
	for i := range out.Rows {
		v := out.Rows[i].NormShares
		if math.IsNaN(v) || i >= rt.Len() {
			continue
		}
		if math.Abs(v-global[i].NormShares) > eps {
			offGlobal++
		}
		if math.Abs(v-sibling[i].NormShares) > eps {
			offSibling++
		}
	}
	switch {
	case offGlobal == 0 && configured != fairshare.AlgorithmFairTree:
		return configured // classic and depth_oblivious normalize alike
	case offGlobal == 0:
		return fairshare.AlgorithmClassic
	case offSibling == 0:
		return fairshare.AlgorithmFairTree
	}
	return "unknown"
}
