package drift

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// FromSshare turns sshare rows into the reported side. Values sshare prints
// with %f are exact to half a unit in the sixth decimal, which the
// tolerance covers.
func FromSshare(out *shares.Table) []Side {
	sides := make([]Side, len(out.Rows))
	var stack []string
	for i, r := range out.Rows {
		s := &sides[i]
		s.Key = Key{Account: r.Account, User: r.User, Partition: r.Partition}
		s.Depth = r.Depth
		if r.Depth > 0 && r.Depth <= len(stack) {
			s.Parent = stack[r.Depth-1]
		}
		if r.User == "" {
			stack = append(stack[:min(r.Depth, len(stack))], r.Account)
		}
		s.Values = Values{Num(r.NormShares), Num(r.RawUsage), Num(r.NormUsage), Num(r.EffectvUsage), Num(r.FairShare), Num(r.LevelFS)}
	}
	return sides
}

// FromTree turns computed values into the computed side; bounds may be nil.
func FromTree(t *fairshare.Tree, vals, bounds []fairshare.Values) []Side {
	n := t.Len()
	sides := make([]Side, n)
	depth := make([]int, n)
	for i := range depth {
		depth[i] = -1
	}
	var depthOf func(i int) int
	depthOf = func(i int) int {
		if depth[i] < 0 {
			if p := t.Association(i).Parent; p < 0 {
				depth[i] = 0
			} else {
				depth[i] = depthOf(p) + 1
			}
		}
		return depth[i]
	}
	for i := 0; i < n; i++ {
		a := t.Association(i)
		s := &sides[i]
		s.Key = Key{Account: a.Account, User: a.User, Partition: a.Partition}
		s.Depth = depthOf(i)
		if a.Parent >= 0 {
			s.Parent = t.Association(a.Parent).Account
		}
		s.Values = FromFairshare(vals[i])
		if bounds != nil {
			s.Bound = FromFairshare(bounds[i])
			for _, p := range s.Bound.fields() {
				if math.IsNaN(float64(*p)) {
					*p = 0
				}
			}
		}
	}
	return sides
}
