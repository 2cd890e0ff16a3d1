// Package fairshare recomputes Slurm's fairshare factors from an association
// tree: shares and decayed raw usage in, factors out. It does no I/O and reads
// no clock. Each algorithm follows src/plugins/priority/multifactor/ and
// src/common/assoc_mgr.c of SchedMD/slurm; docs/fairshare.md lists the rules
// and where real Slurm departs from its documentation.
package fairshare

import (
	"fmt"
	"math"
	"slices"
)

// SharesParent is how Slurm stores FairShare=parent (SLURMDB_FS_USE_PARENT,
// slurm/slurmdb.h); the database column holds 2147483647.
const SharesParent uint32 = 0x7FFFFFFF

// noVal is Slurm's NO_VAL as a floating-point value. Fair Tree gives it to
// FairShare=parent accounts as their level_fs, and it seeds the tie check.
const noVal = 4294967294.0

// Association is one node of the tree as slurmctld's assoc_mgr holds it.
type Association struct {
	Account   string
	User      string // empty on account rows
	Partition string
	// Parent is the index of the direct parent in the slice given to
	// NewTree: the account row of a user, the parent_acct row of an
	// account, -1 for root.
	Parent int
	// Shares is the raw share count; SharesParent for FairShare=parent.
	Shares uint32
	// RawUsage is the decayed usage (slurmctld usage_raw, billing-seconds).
	// An account's value is not always the sum of its children: since 22.05
	// it keeps the usage of removed user associations.
	RawUsage float64
}

// IsUser reports whether a is a user association.
func (a *Association) IsUser() bool { return a.User != "" }

// UsesParent reports whether a has FairShare=parent.
func (a *Association) UsesParent() bool { return a.Shares == SharesParent }

// Tree is an association tree prepared for the algorithms. It is immutable
// and safe for concurrent use.
type Tree struct {
	assocs []Association
	root   int32
	// order lists every association parents-first (pre-order over the direct
	// parent links).
	order []int32
	// fsParent is the first ancestor that is not FairShare=parent
	// (assoc_mgr.c _set_assoc_parent_and_user: fs_assoc_ptr); -1 for root.
	fsParent []int32
	// kids[kidStart[i]:kidStart[i+1]] are the associations whose fsParent
	// is i, in input order: slurmctld's children_list, in which a
	// FairShare=parent account's children join its own siblings and users
	// and sub-accounts are siblings alike.
	kids     []int32
	kidStart []int32
	// levelShares is the sum of raw shares over an association's fs
	// siblings, FairShare=parent ones counting 0 (level_shares).
	levelShares []float64
	users       int
	// Compact copies of the fields the algorithms read, for cache-friendly
	// passes over large trees.
	parent []int32
	shares []float64
	raw    []float64
	kind   []uint8 // kindUser | kindParent
}

const (
	kindUser uint8 = 1 << iota
	kindParent
)

// Same reports whether t and o hold the same associations in the same
// order, and so compute the same values.
func (t *Tree) Same(o *Tree) bool {
	return t == o || (t != nil && o != nil && slices.Equal(t.assocs, o.assocs))
}

func (t *Tree) isUser(i int32) bool     { return t.kind[i]&kindUser != 0 }
func (t *Tree) usesParent(i int32) bool { return t.kind[i]&kindParent != 0 }

// NewTree checks the associations and prepares the tree. The slice is kept,
// not copied: do not change it afterwards. The order of the slice is the
// order slurmctld keeps siblings in, which decides exact Fair Tree ties.
func NewTree(assocs []Association) (*Tree, error) {
	n := len(assocs)
	if n == 0 {
		return nil, fmt.Errorf("association tree is empty: expected at least the root account")
	}
	if n > math.MaxInt32-1 {
		return nil, fmt.Errorf("association tree has %d associations: more than this package supports", n)
	}
	t := &Tree{assocs: assocs, root: -1, fsParent: make([]int32, n),
		parent: make([]int32, n), shares: make([]float64, n), raw: make([]float64, n), kind: make([]uint8, n)}
	childCount := make([]int32, n+1)
	if err := t.readAssociations(childCount); err != nil {
		return nil, err
	}
	direct, fill := t.orderParentsFirst(childCount)
	if err := t.checkReachable(); err != nil {
		return nil, err
	}
	t.setFSParents()
	t.setFSChildren(childCount, direct, fill)
	return t, nil
}

// readAssociations checks each association's parent and usage, copies
// the fields the algorithms read and counts each parent's direct
// children into childCount.
func (t *Tree) readAssociations(childCount []int32) error {
	assocs, n := t.assocs, len(t.assocs)
	for i := range assocs {
		a := &assocs[i]
		switch {
		case a.Parent == -1:
			if t.root >= 0 {
				return fmt.Errorf("association %s has no parent, but %s is already the root: expected one root", a.name(), assocs[t.root].name())
			}
			if a.IsUser() {
				return fmt.Errorf("association %s is a user without a parent: expected the root to be an account", a.name())
			}
			t.root = int32(i)
		case a.Parent < 0 || a.Parent >= n:
			return fmt.Errorf("association %s has parent index %d: expected -1 or an index below %d", a.name(), a.Parent, n)
		case assocs[a.Parent].IsUser():
			return fmt.Errorf("association %s has user association %s as parent: expected an account", a.name(), assocs[a.Parent].name())
		default:
			childCount[a.Parent]++
		}
		t.parent[i], t.shares[i], t.raw[i] = int32(a.Parent), float64(a.Shares), a.RawUsage
		if a.IsUser() {
			t.kind[i] |= kindUser
		}
		if a.UsesParent() {
			t.kind[i] |= kindParent
		}
		if math.IsNaN(a.RawUsage) || a.RawUsage < 0 || math.IsInf(a.RawUsage, 0) {
			return fmt.Errorf("association %s has raw usage %v: expected a finite number >= 0", a.name(), a.RawUsage)
		}
	}
	if t.root < 0 {
		return fmt.Errorf("association tree has no root: expected one association without a parent")
	}
	return nil
}

// orderParentsFirst sets t.order from the direct children (childCount of
// each). It returns the direct children in CSR form and a scratch slice
// of n, which setFSChildren reuses. t.order is short of n where some
// associations are not reachable from the root.
func (t *Tree) orderParentsFirst(childCount []int32) (direct, fill []int32) {
	assocs, n := t.assocs, len(t.assocs)
	start := make([]int32, n+1)
	for i := 0; i < n; i++ {
		start[i+1] = start[i] + childCount[i]
	}
	direct = make([]int32, n)
	fill = append([]int32(nil), start[:n]...)
	for i := range assocs {
		if p := assocs[i].Parent; p >= 0 {
			direct[fill[p]] = int32(i)
			fill[p]++
		}
	}
	t.order = make([]int32, 0, n)
	t.order = append(t.order, t.root)
	for k := 0; k < len(t.order); k++ {
		p := t.order[k]
		t.order = append(t.order, direct[start[p]:start[p+1]]...)
	}
	if len(t.order) == n && parentsFirst(assocs) {
		// Input order is already parents-first (sshare's is, and so is a
		// database read ordered by lft or lineage): walking it in place is
		// sequential in memory, which beats the breadth-first order on
		// large trees (docs/performance.md).
		for i := range t.order {
			t.order[i] = int32(i)
		}
	}
	return direct, fill
}

// checkReachable fails when t.order, walked from the root, misses an
// association: a cycle.
func (t *Tree) checkReachable() error {
	n := len(t.assocs)
	if len(t.order) == n {
		return nil
	}
	seen := make([]bool, n)
	for _, i := range t.order {
		seen[i] = true
	}
	for i := range t.assocs {
		if !seen[i] {
			return fmt.Errorf("association %s is not reachable from the root: expected a tree without cycles", t.assocs[i].name())
		}
	}
	return nil
}

// setFSParents sets fsParent, parents-first so an ancestor's is known.
func (t *Tree) setFSParents() {
	t.fsParent[t.root] = -1
	for _, i := range t.order[1:] {
		p := int32(t.assocs[i].Parent)
		if p != t.root && t.assocs[p].UsesParent() {
			p = t.fsParent[p]
		}
		t.fsParent[i] = p
	}
}

// setFSChildren sets the children lists by fs parent, in input order
// (kids, kidStart), levelShares and users. childCount, direct and fill
// are orderParentsFirst's scratch, reused.
func (t *Tree) setFSChildren(childCount, direct, fill []int32) {
	assocs, n := t.assocs, len(t.assocs)
	clear(childCount)
	for i := range assocs {
		if p := t.fsParent[i]; p >= 0 {
			childCount[p]++
		}
		if assocs[i].IsUser() {
			t.users++
		}
	}
	t.kidStart = make([]int32, n+1)
	for i := 0; i < n; i++ {
		t.kidStart[i+1] = t.kidStart[i] + childCount[i]
	}
	t.kids = direct // reuse: same length, n-1 used
	copy(fill, t.kidStart[:n])
	sum := make([]float64, n)
	for i := range assocs {
		if p := t.fsParent[i]; p >= 0 {
			t.kids[fill[p]] = int32(i)
			fill[p]++
			if !assocs[i].UsesParent() {
				sum[p] += float64(assocs[i].Shares)
			}
		}
	}
	t.levelShares = make([]float64, n)
	for i := range assocs {
		if p := t.fsParent[i]; p >= 0 {
			t.levelShares[i] = sum[p]
		}
	}
}

func parentsFirst(assocs []Association) bool {
	for i := range assocs {
		if assocs[i].Parent >= i {
			return false
		}
	}
	return true
}

// Len is the number of associations.
func (t *Tree) Len() int { return len(t.assocs) }

// Association returns association i as given to NewTree.
func (t *Tree) Association(i int) Association { return t.assocs[i] }

// Root is the index of the root account.
func (t *Tree) Root() int { return int(t.root) }

// Users is the number of user associations, Fair Tree's denominator.
func (t *Tree) Users() int { return t.users }

func (a *Association) name() string {
	s := "account=" + quoteIfOdd(a.Account)
	if a.User != "" {
		s += " user=" + quoteIfOdd(a.User)
	}
	if a.Partition != "" {
		s += " partition=" + quoteIfOdd(a.Partition)
	}
	return s
}

func quoteIfOdd(s string) string {
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '=' || r > '~' {
			return fmt.Sprintf("%q", s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Values are the numbers sshare prints for one association, computed. NaN
// stands for a blank cell: a value Slurm leaves unset (NO_VAL) or does not
// print for this kind of row.
type Values struct {
	NormShares     float64
	RawUsage       float64
	NormUsage      float64
	EffectiveUsage float64
	FairShare      float64
	LevelFS        float64
	// Rank is the Fair Tree rank behind FairShare = Rank/Users (0 where
	// none): competition ranking, counted down from the number of users.
	Rank int32
	// RankMin and RankMax bound the rank over every order of sibling
	// accounts tied on LevelFS. slurmctld walks tied accounts in its list
	// order, which is the database's lft order up to 23.02 (newest sibling
	// first) and lineage order from 23.11; sshare before 23.11 prints them
	// alphabetically, so a replay from its output cannot know it.
	RankMin, RankMax int32
}

// RankSpread is how far FairShare could move under another order of tied
// sibling accounts: the larger distance from Rank to RankMin or RankMax,
// over the number of users. 0 outside Fair Tree.
func (v Values) RankSpread(users int) float64 {
	if users == 0 {
		return 0
	}
	return float64(max(v.Rank-v.RankMin, v.RankMax-v.Rank)) / float64(users)
}

var blank = math.NaN()

// normUsage is set_assoc_usage_norm (priority_multifactor.c): the share of
// root's usage, 0 when root has none, capped at 1 because a lowered
// half-life can leave more usage than the new decay allows.
func normUsage(raw, rootRaw float64) float64 {
	if rootRaw == 0 {
		return 0
	}
	return math.Min(raw/rootRaw, 1)
}
