package shares

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Of is what `sshare -a -l -m -P` prints for a tree with the given
// Fair Tree values: rows depth-first, users before sub-accounts, RawUsage
// truncated, values at print precision.
func Of(t *fairshare.Tree, vals []fairshare.Values) *Table {
	n := t.Len()
	children := make([][]int, n)
	for i := range n {
		if p := t.Association(i).Parent; p >= 0 {
			children[p] = append(children[p], i)
		}
	}
	out := &Table{Columns: Columns(true, true, true), Header: true}
	round := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	var walk func(i, depth int)
	walk = func(i, depth int) {
		a := t.Association(i)
		v := vals[i]
		out.Rows = append(out.Rows, Row{
			Line: len(out.Rows) + 2, Depth: depth, Account: a.Account, User: a.User, Partition: a.Partition,
			RawShares: a.Shares, HasShares: a.Parent >= 0, NormShares: round(v.NormShares), RawUsage: math.Trunc(a.RawUsage),
			NormUsage: round(v.NormUsage), EffectvUsage: round(v.EffectiveUsage), FairShare: round(v.FairShare), LevelFS: round(v.LevelFS),
		})
		for _, users := range []bool{true, false} {
			for _, c := range children[i] {
				if ca := t.Association(c); ca.IsUser() == users {
					walk(c, depth+1)
				}
			}
		}
	}
	walk(t.Root(), 0)
	return out
}
