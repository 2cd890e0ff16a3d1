package drift

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
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
		s.Key = result.KeyOf(r.Account, r.User, r.Partition)
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
	return fromTree(nil, t, vals, bounds)
}

// fromTree is FromTree in dst's memory where it has room: a comparison's
// sides are 100k of 176 bytes each, and one it is done with can hold the
// next.
func fromTree(dst []Side, t *fairshare.Tree, vals, bounds []fairshare.Values) []Side {
	sides := append(dst[:0], make([]Side, t.Len())...) // zeroed
	for i := range sides {
		sides[i].Depth = -1 // not known yet
	}
	var depthOf func(i int) int
	depthOf = func(i int) int {
		if s := &sides[i]; s.Depth < 0 {
			if p := t.Association(i).Parent; p < 0 {
				s.Depth = 0
			} else {
				s.Depth = depthOf(p) + 1
			}
		}
		return sides[i].Depth
	}
	for i := range sides {
		a := t.Association(i)
		s := &sides[i]
		s.Key = result.KeyOf(a.Account, a.User, a.Partition)
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
