package fairshare

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestWhatIfAgainstEditedInputs: WithShares and Changes against a tree
// built again from associations edited by hand, on random trees and
// changes (a user's, an account's, FairShare=parent), both algorithms.
func TestWhatIfAgainstEditedInputs(t *testing.T) {
	moved := map[Algorithm]int{}
	for seed := uint64(1); seed <= 6; seed++ {
		tr := Synthetic(300, 4, seed)
		r := rand.New(rand.NewPCG(seed, 3))
		var changes []ShareChange
		for len(changes) < 3 {
			i := 1 + r.IntN(tr.Len()-1)
			a := tr.Association(i)
			if a.RawUsage == 0 {
				continue // Fair Tree ranks users without usage alike at any shares
			}
			c := ShareChange{Account: a.Account, User: a.User, Shares: uint32(1 + r.IntN(500))}
			if r.IntN(4) == 0 {
				c.Shares = SharesParent
			}
			changes = append(changes, c)
		}
		assocs := make([]Association, tr.Len())
		for i := range assocs {
			assocs[i] = tr.Association(i)
			for _, c := range changes {
				if assocs[i].Account == c.Account && assocs[i].User == c.User {
					assocs[i].Shares = c.Shares
				}
			}
		}
		edited, err := NewTree(assocs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr.WithShares(changes)
		if err != nil {
			t.Fatal(err)
		}
		for _, alg := range []Algorithm{AlgorithmClassic, AlgorithmFairTree} {
			before, _ := tr.Compute(alg, 1)
			want, _ := edited.Compute(alg, 1)
			after, _ := got.Compute(alg, 1)
			list := Changes(before, after)
			listed := map[int]bool{}
			for k, c := range list {
				listed[c.Assoc] = true
				if !sameNum(c.After.FairShare, want[c.Assoc].FairShare) || c.After.Rank != want[c.Assoc].Rank {
					t.Fatalf("seed %d %s: %d after %v/%d: edited inputs give %v/%d", seed, alg, c.Assoc, c.After.FairShare, c.After.Rank, want[c.Assoc].FairShare, want[c.Assoc].Rank)
				}
				if k > 0 && math.Abs(list[k-1].Delta()) < math.Abs(c.Delta()) {
					t.Fatalf("seed %d %s: not sorted by the size of the change at %d", seed, alg, k)
				}
			}
			for i := range before {
				m := math.Abs(before[i].FairShare-want[i].FairShare) > 1e-12 || before[i].Rank != want[i].Rank
				if m != listed[i] {
					t.Fatalf("seed %d %s: association %d moved %v, listed %v", seed, alg, i, m, listed[i])
				}
			}
			moved[alg] += len(list)
		}
	}
	for _, alg := range []Algorithm{AlgorithmClassic, AlgorithmFairTree} {
		if moved[alg] == 0 {
			t.Errorf("%s: no change moved any factor: the test tests nothing", alg)
		}
	}
	t.Logf("changes listed: %v", moved)
}

func sameNum(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func TestWhatIfUnknown(t *testing.T) {
	tr := Synthetic(50, 3, 1)
	a := tr.Association(1)
	for _, c := range []struct {
		change ShareChange
		want   string
	}{
		{ShareChange{Account: "nosuch", Shares: 1}, "no account nosuch"},
		{ShareChange{Account: a.Account, User: "nobody", Shares: 1}, "has no user nobody"},
		{ShareChange{Account: "root", Shares: SharesParent}, "root has no parent"},
	} {
		_, err := tr.WithShares([]ShareChange{c.change})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v: expected %q", c.change, err, c.want)
		}
	}
}
