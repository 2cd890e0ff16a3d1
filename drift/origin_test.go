package drift

import (
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestUsageOriginNotes: a user's RawUsage reset in slurmctld (subtracted
// from every ancestor, as assoc_mgr_remove_assoc_usage does) and not in
// the database, the loss seen between two reads, is named on the user,
// and its ancestors are said to follow from it; an account that differs
// on its own (its usage is not its users') is not.
func TestUsageOriginNotes(t *testing.T) {
	out := capture(t, "slurm-22.05/running-classic-1.txt")
	assocs, err := out.Associations()
	if err != nil {
		t.Fatal(err)
	}
	u := -1
	for i, a := range assocs {
		if a.User != "" && a.User != "root" && a.RawUsage > 1000 {
			u = i
			break
		}
	}
	if u < 0 {
		t.Fatal("no user with usage in the capture")
	}
	db, err := fairshare.NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	lost := out.Rows[u].RawUsage
	for i := u; i >= 0; i = assocs[i].Parent {
		out.Rows[i].RawUsage -= lost
	}
	// an account whose own usage differs: the first account not on u's
	// chain gets more in the database than its users hold
	onChain := map[int]bool{}
	for i := u; i >= 0; i = assocs[i].Parent {
		onChain[i] = true
	}
	other := -1
	for i, a := range assocs {
		if a.User == "" && !onChain[i] && a.RawUsage > 1000 {
			other = i
			break
		}
	}
	if other < 0 {
		t.Fatal("no other account with usage in the capture")
	}
	out.Rows[other].RawUsage -= assocs[other].RawUsage / 2
	seen := []result.UsageLoss{{AssocKey: result.KeyOf(assocs[u].Account, assocs[u].User, assocs[u].Partition), Kind: result.LossBetweenPasses}}
	c, err := CompareReport(Input{Algorithm: fairshare.AlgorithmClassic, Dampening: 1, Tolerance: Tolerance{Formula: 1e-6, Usage: 0.005, Factor: 0.01}, Report: out, DB: db, TieOrderKnown: true, Losses: seen}, true)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	for _, e := range c.Usage.Associations {
		notes[e.Account+"/"+e.User] = strings.Join(e.Notes, "; ")
		if e.Account == assocs[other].Account && e.User == "" && e.Status != StatusDrift {
			t.Fatalf("%s: %s: the account differing on its own is not flagged, the test shows nothing", e.Account, e.Status)
		}
	}
	user := assocs[u].Account + "/" + assocs[u].User
	if !strings.Contains(notes[user], "usage reset in slurmctld") {
		t.Errorf("%s (reset): notes %q", user, notes[user])
	}
	for i := assocs[u].Parent; i >= 0; i = assocs[i].Parent {
		k := assocs[i].Account + "/"
		if i == other || !strings.Contains(notes[k], "follows from its users' usage") || !strings.Contains(notes[k], user) {
			t.Errorf("%s (an ancestor of %s): notes %q", k, user, notes[k])
		}
	}
	if k := assocs[other].Account + "/"; strings.Contains(notes[k], "follows from") {
		t.Errorf("%s differs on its own, yet: %q", k, notes[k])
	}
}
