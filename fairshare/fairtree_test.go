package fairshare

import (
	"fmt"
	"math"
	"testing"
)

// build makes a tree from compact rows: {account, user, parent account,
// shares, raw}. Rows must list parents before children.
type row struct {
	acct, user, parent string
	shares             uint32
	raw                float64
}

func build(t testing.TB, rows []row) (*Tree, map[string]int) {
	t.Helper()
	idx := map[string]int{}
	assocs := make([]Association, len(rows))
	for i, r := range rows {
		p := -1
		if r.parent != "" {
			p = idx[r.parent]
		}
		name := r.acct
		if r.user != "" {
			name = r.acct + "/" + r.user
		}
		idx[name] = i
		assocs[i] = Association{Account: r.acct, User: r.user, Parent: p, Shares: r.shares, RawUsage: r.raw}
	}
	tree, err := NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	return tree, idx
}

func ranks(v []Values, idx map[string]int, names ...string) []int {
	var r []int
	for _, n := range names {
		r = append(r, int(v[idx[n]].Rank))
	}
	return r
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFairTreeTies covers the three tie cases of the Fair Tree announcement
// (../shared/reference/fair-tree-algorithm.txt) as real Slurm implements
// them.
func TestFairTreeTies(t *testing.T) {
	t.Run("users tie users", func(t *testing.T) {
		// "Sibling users with the same level_fs receive the same rank";
		// the next one skips ("80, 80, 80, 77").
		tree, ix := build(t, []row{
			{"root", "", "", 1, 10},
			{"a", "", "root", 1, 10},
			{"a", "x", "a", 1, 0}, {"a", "y", "a", 1, 0}, {"a", "z", "a", 1, 0}, {"a", "w", "a", 1, 10},
		})
		got := ranks(tree.FairTree(), ix, "a/x", "a/y", "a/z", "a/w")
		if want := []int{4, 4, 4, 1}; !equalInts(got, want) {
			t.Errorf("ranks %v, want %v", got, want)
		}
	})
	t.Run("user ties account", func(t *testing.T) {
		// "A user with the same level_fs as a sibling account will receive
		// the same rank as the account's highest ranked user."
		tree, ix := build(t, []row{
			{"root", "", "", 1, 20},
			{"a", "", "root", 1, 20},
			{"sub", "", "a", 1, 10}, {"a", "u", "a", 1, 10},
			{"sub", "s1", "sub", 1, 4}, {"sub", "s2", "sub", 1, 6},
		})
		v := tree.FairTree()
		if v[ix["a/u"]].LevelFS != v[ix["sub"]].LevelFS {
			t.Fatalf("test tree: u and sub should tie, LevelFS %v and %v", v[ix["a/u"]].LevelFS, v[ix["sub"]].LevelFS)
		}
		got := ranks(v, ix, "a/u", "sub/s1", "sub/s2")
		if want := []int{3, 3, 1}; !equalInts(got, want) {
			t.Errorf("ranks %v, want %v", got, want)
		}
	})
	t.Run("accounts tie accounts: not merged", func(t *testing.T) {
		// The announcement merges tied accounts' children; fair_tree.c's
		// _count_tied_accounts always returns 0, so Slurm walks them one
		// after the other and the second starts tied with the last user
		// ranked. Merged, t1/u and t2/u would share rank 3 and t1/zero get 1.
		tree, ix := build(t, []row{
			{"root", "", "", 1, 0},
			{"t1", "", "root", 1, 0}, {"t2", "", "root", 1, 0},
			{"t1", "u", "t1", 1, 0}, {"t1", "zero", "t1", 0, 0},
			{"t2", "u", "t2", 1, 0},
		})
		got := ranks(tree.FairTree(), ix, "t1/u", "t1/zero", "t2/u")
		if want := []int{3, 2, 2}; !equalInts(got, want) {
			t.Errorf("ranks %v, want %v (Slurm 22.05-25.11 behaviour)", got, want)
		}
	})
}

// TestFairTreeParent: a FairShare=parent user ranks first among its
// siblings (level_fs infinite), and a FairShare=parent account's children
// compete with its siblings, measured against the grandparent.
func TestFairTreeParent(t *testing.T) {
	tree, ix := build(t, []row{
		{"root", "", "", 1, 100},
		{"d", "", "root", 60, 100},
		{"e", "", "d", 25, 60}, {"p", "", "d", SharesParent, 40},
		{"e", "u4", "e", 1, 60}, {"e", "up", "e", SharesParent, 0},
		{"p", "u10", "p", 3, 40},
	})
	v := tree.FairTree()
	near(t, "u10 NormShares", v[ix["p/u10"]].NormShares, 3.0/28, 1e-15)
	near(t, "u10 EffectvUsage", v[ix["p/u10"]].EffectiveUsage, 0.4, 1e-15)
	near(t, "e NormShares", v[ix["e"]].NormShares, 25.0/28, 1e-15)
	near(t, "p NormShares", v[ix["p"]].NormShares, 1, 1e-15) // d's share of root's children (d alone)
	if !math.IsNaN(v[ix["p"]].LevelFS) || !math.IsNaN(v[ix["e/up"]].LevelFS) {
		t.Errorf("LevelFS of parent rows %v %v: want blank, as sshare prints", v[ix["p"]].LevelFS, v[ix["e/up"]].LevelFS)
	}
	if v[ix["e/up"]].Rank <= v[ix["e/u4"]].Rank {
		t.Errorf("parent user rank %d not above sibling %d", v[ix["e/up"]].Rank, v[ix["e/u4"]].Rank)
	}
}

func TestClassicParentAndZero(t *testing.T) {
	tree, ix := build(t, []row{
		{"root", "", "", 1, 100},
		{"a", "", "root", 1, 100},
		{"b", "", "a", 1, 60}, {"p", "", "a", SharesParent, 40},
		{"b", "u", "b", 1, 50}, {"b", "z", "b", 0, 10}, {"b", "pu", "b", SharesParent, 0},
		{"p", "x", "p", 1, 40},
	})
	v := tree.Classic(ClassicOptions{})
	// z has 0 shares: NormShares 0, FairShare 0.
	if v[ix["b/z"]].NormShares != 0 || v[ix["b/z"]].FairShare != 0 {
		t.Errorf("0-share user %+v", v[ix["b/z"]])
	}
	// pu takes b's values.
	if v[ix["b/pu"]].NormShares != v[ix["b"]].NormShares || v[ix["b/pu"]].EffectiveUsage != v[ix["b"]].EffectiveUsage || v[ix["b/pu"]].FairShare != v[ix["b"]].FairShare {
		t.Errorf("parent user %+v, account %+v", v[ix["b/pu"]], v[ix["b"]])
	}
	// x competes with b under a: its level_shares is b's 1 + x's 1.
	near(t, "x NormShares", v[ix["p/x"]].NormShares, 0.5, 1e-15)
	// b's level shares: u (1) + z (0); pu counts 0.
	near(t, "u NormShares", v[ix["b/u"]].NormShares, 0.5, 1e-15)
}

// TestInvariants: on random trees every factor is in [0,1], no value is NaN
// where sshare prints one, and the result does not depend on anything but
// the input.
func TestInvariants(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		tree := Synthetic(300, 5, seed)
		for _, alg := range []Algorithm{AlgorithmClassic, AlgorithmDepthOblivious, AlgorithmFairTree} {
			v1, err := tree.Compute(alg, 1)
			if err != nil {
				t.Fatal(err)
			}
			v2, _ := tree.Compute(alg, 1)
			for i := range v1 {
				a := tree.Association(i)
				fs := v1[i].FairShare
				if !same(v1[i], v2[i]) {
					t.Fatalf("seed %d %s: not deterministic at %d", seed, alg, i)
				}
				if a.IsUser() && (math.IsNaN(fs) || fs < 0 || fs > 1) {
					t.Fatalf("seed %d %s: %s FairShare %v", seed, alg, a.name(), fs)
				}
				if math.IsNaN(v1[i].NormShares) || math.IsNaN(v1[i].EffectiveUsage) {
					t.Fatalf("seed %d %s: %s has NaN %+v", seed, alg, a.name(), v1[i])
				}
			}
		}
		// Fair Tree ranks: users' ranks run from Users() down, ties allowed.
		v := tree.FairTree()
		seen := 0
		for i, x := range v {
			if tree.assocs[i].IsUser() {
				seen++
				if x.Rank < 1 || int(x.Rank) > tree.Users() {
					t.Fatalf("seed %d: rank %d outside 1..%d", seed, x.Rank, tree.Users())
				}
			}
		}
		if seen != tree.Users() {
			t.Fatalf("Users() %d, counted %d", tree.Users(), seen)
		}
	}
}

// same compares values with NaN equal to NaN.
func same(a, b Values) bool {
	eq := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	return a.Rank == b.Rank && eq(a.NormShares, b.NormShares) && eq(a.RawUsage, b.RawUsage) && eq(a.NormUsage, b.NormUsage) &&
		eq(a.EffectiveUsage, b.EffectiveUsage) && eq(a.FairShare, b.FairShare) && eq(a.LevelFS, b.LevelFS)
}

func TestNewTreeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		assocs []Association
		want   string
	}{
		{"empty", nil, "empty"},
		{"no root", []Association{{Account: "a", Parent: 1}, {Account: "b", Parent: 0}}, "no root"},
		{"two roots", []Association{{Account: "a", Parent: -1}, {Account: "b", Parent: -1}}, "already the root"},
		{"parent out of range", []Association{{Account: "root", Parent: -1}, {Account: "b", Parent: 7}}, "parent index 7"},
		{"user as parent", []Association{{Account: "root", Parent: -1}, {Account: "root", User: "u", Parent: 0}, {Account: "x", Parent: 1}}, "has user association"},
		{"cycle", []Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 2}, {Account: "b", Parent: 1}}, "not reachable"},
		{"negative usage", []Association{{Account: "root", Parent: -1, RawUsage: -1}}, "raw usage -1"},
		{"NaN usage", []Association{{Account: "root", Parent: -1, RawUsage: math.NaN()}}, "raw usage NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTree(tc.assocs)
			if err == nil || !contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

var sink []Values

// BenchmarkCompute runs classic and Fair Tree together on synthetic trees
// of depth 5 (the target: 100k associations in 20 ms on one core).
func BenchmarkCompute(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		tree := Synthetic(n, 5, 1)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = tree.Classic(ClassicOptions{})
				sink = tree.FairTree()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/assoc")
		})
	}
}
