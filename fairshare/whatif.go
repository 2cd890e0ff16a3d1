package fairshare

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// ShareChange sets the raw shares of an account (User empty) or of a
// user's associations under an account (every partition of it).
type ShareChange struct {
	Account, User string
	// Shares: SharesParent for FairShare=parent.
	Shares uint32
}

func (c ShareChange) String() string {
	if c.User == "" {
		return c.Account
	}
	return c.Account + "/" + c.User
}

// WithShares is t with the shares changed, built again by NewTree: a
// FairShare=parent change moves its children to other siblings. A change
// naming no association is an error that says what was expected.
func (t *Tree) WithShares(changes []ShareChange) (*Tree, error) {
	assocs := slices.Clone(t.assocs)
	for _, c := range changes {
		found := false
		for i := range assocs {
			a := &assocs[i]
			if a.Account != c.Account || a.User != c.User {
				continue
			}
			if int32(i) == t.root && c.Shares == SharesParent {
				return nil, fmt.Errorf("what-if %s=parent: root has no parent: expected shares (a number)", c)
			}
			a.Shares, found = c.Shares, true
		}
		if !found {
			return nil, t.unknown(c)
		}
	}
	return NewTree(assocs)
}

// unknown says which part of c names nothing.
func (t *Tree) unknown(c ShareChange) error {
	for i := range t.assocs {
		if a := &t.assocs[i]; a.Account == c.Account && !a.IsUser() {
			return fmt.Errorf("what-if %s: account %s has no user %s: expected account/user of one of its users", c, quoteIfOdd(c.Account), quoteIfOdd(c.User))
		}
	}
	return fmt.Errorf("what-if %s: no account %s in the tree: expected an existing account, or account/user", c, quoteIfOdd(c.Account))
}

// Change is an association whose factor or Fair Tree rank differs
// between two computations of the same associations.
type Change struct {
	Assoc         int
	Before, After Values
}

// Delta is the change of the factor (0 where either is blank).
func (c Change) Delta() float64 {
	d := c.After.FairShare - c.Before.FairShare
	if math.IsNaN(d) {
		return 0
	}
	return d
}

// Changes lists the associations whose FairShare or Rank differs between
// before and after (indexed alike), the largest change of the factor
// first, then of the rank. Differences below 1e-12 are rounding of
// unchanged inputs, not changes.
func Changes(before, after []Values) []Change {
	var out []Change
	for i := range before {
		b, a := before[i], after[i]
		same := b.FairShare == a.FairShare || math.Abs(b.FairShare-a.FairShare) < 1e-12 || (math.IsNaN(b.FairShare) && math.IsNaN(a.FairShare))
		if same && b.Rank == a.Rank {
			continue
		}
		out = append(out, Change{Assoc: i, Before: b, After: a})
	}
	slices.SortStableFunc(out, func(x, y Change) int {
		if c := cmp.Compare(math.Abs(y.Delta()), math.Abs(x.Delta())); c != 0 {
			return c
		}
		return cmp.Compare(absRank(y), absRank(x))
	})
	return out
}

func absRank(c Change) int32 {
	d := c.After.Rank - c.Before.Rank
	return max(d, -d)
}
