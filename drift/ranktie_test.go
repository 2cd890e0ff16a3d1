package drift

import (
	"fmt"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// nearTie is a Fair Tree of two top-level accounts of equal shares, four
// users each, with usage a and b (each user a quarter): their LevelFS are
// within 1% when a and b are.
func nearTie(t *testing.T, a, b float64) *fairshare.Tree {
	t.Helper()
	assocs := []fairshare.Association{{Account: "root", Parent: -1, RawUsage: a + b}}
	for _, acct := range []struct {
		name  string
		usage float64
	}{{"a", a}, {"b", b}} {
		p := len(assocs)
		assocs = append(assocs, fairshare.Association{Account: acct.name, Parent: 0, Shares: 50, RawUsage: acct.usage})
		for u := range 4 {
			assocs = append(assocs, fairshare.Association{Account: acct.name, User: fmt.Sprintf("%s%d", acct.name, u), Parent: p, Shares: 1, RawUsage: acct.usage / 4})
		}
	}
	tr, err := fairshare.NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestRankTieInherited: two top-level accounts whose LevelFS are within
// 1% swap places between the database's usage and slurmctld's when each
// account's usage is off by less than the usage tolerance, which judges
// them ok: a swap the accounts may make is one every user below them may
// make, so no user's factor drifts. Accounts further apart than the
// tolerance explains still rank their users as the database's usage
// does: a swap of them is flagged on every user below, whose usage
// agrees or not.
func TestRankTieInherited(t *testing.T) {
	for _, c := range []struct {
		name       string
		dbA, dbB   float64 // the database's usage of the accounts
		a, b       float64 // slurmctld's
		usersDrift int
	}{
		{"within the usage tolerance", 100_000, 100_500, 100_400, 100_100, 0},
		// a's usage 3.4% off: its users drift by usage, b's, whose
		// usage agrees, by the rank a swap of accounts 3% apart gives
		{"accounts 3% apart", 100_000, 103_000, 103_400, 103_000, 8},
	} {
		db, rt := nearTie(t, c.dbA, c.dbB), nearTie(t, c.a, c.b)
		out := shares.Of(rt, rt.FairTree())
		cmp, err := CompareReport(Input{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1, Tolerance: DefaultTolerance,
			Report: out, DB: db, TieOrderKnown: true}, true)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range cmp.Usage.Associations {
			if e.User != "" && e.Status == StatusDrift {
				n++
			}
		}
		if n != c.usersDrift {
			t.Errorf("%s: %d users drift, want %d", c.name, n, c.usersDrift)
			for _, e := range cmp.Usage.Associations {
				t.Logf("%s/%s %s drift %v bound %v notes %q", e.Account, e.User, e.Status, e.Drift, e.Bound, e.Notes)
			}
		}
	}
}
