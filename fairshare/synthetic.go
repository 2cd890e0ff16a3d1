package fairshare

import (
	"fmt"
	"math/rand/v2"
)

// Synthetic builds a deterministic tree of n associations (n >= 2) whose
// accounts go depth-1 levels below root, for benchmarks and property tests:
// about ten children per account, users mostly under the deepest accounts
// and some beside sub-accounts, 3% FairShare=parent, 2% zero shares, and
// one user in ten with usage (accounts hold their subtree's sum).
func Synthetic(n, depth int, seed uint64) *Tree {
	if n < 2 || depth < 2 {
		panic("Synthetic: need n >= 2 and depth >= 2")
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	assocs := make([]Association, 0, n)
	assocs = append(assocs, Association{Account: "root", Parent: -1, Shares: 1})
	shares := func(canParent bool) uint32 {
		switch x := r.IntN(100); {
		case x < 3 && canParent:
			return SharesParent
		case x < 5:
			return 0
		}
		return uint32(1 + r.IntN(100))
	}
	// Accounts level by level, about a tenth of n in all.
	budget := max(n/10, 1)
	level := []int{0}
	var leaves []int
	for d := 1; d < depth && budget > 0; d++ {
		var next []int
		for _, p := range level {
			for k := 5 + r.IntN(11); k > 0 && budget > 0; k-- {
				assocs = append(assocs, Association{Account: fmt.Sprintf("a%d", len(assocs)), Parent: p, Shares: shares(d > 1)})
				next = append(next, len(assocs)-1)
				budget--
			}
		}
		leaves = append(leaves, level...)
		level = next
	}
	leaves = append(leaves, level...)
	deepest := level
	for len(assocs) < n {
		p := deepest[r.IntN(len(deepest))]
		if r.IntN(20) == 0 {
			p = leaves[r.IntN(len(leaves))]
		}
		u := Association{Account: assocs[p].Account, User: fmt.Sprintf("u%d", len(assocs)), Parent: p, Shares: shares(true)}
		if r.IntN(10) == 0 {
			u.RawUsage = float64(r.IntN(1e9))
		}
		assocs = append(assocs, u)
	}
	// Children come after parents: sum usage bottom-up.
	for i := len(assocs) - 1; i > 0; i-- {
		assocs[assocs[i].Parent].RawUsage += assocs[i].RawUsage
	}
	t, err := NewTree(assocs)
	if err != nil {
		panic(err)
	}
	return t
}
