package slurmdbd

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOrderAsSlurmctld(t *testing.T) {
	// lft order from the database; idle2 (created last, before boot) comes
	// first there, as sacctmgr inserts new siblings on the left.
	rows := []Assoc{
		{ID: 1, Account: "root", Created: 100},
		{ID: 9, Account: "late2", Created: 300},
		{ID: 3, Account: "idle2", Created: 150},
		{ID: 8, Account: "late1", Created: 300},
		{ID: 2, Account: "idle1", Created: 120},
		{ID: 7, Account: "late0", Created: 250},
	}
	OrderAsSlurmctld(rows, time.Unix(200, 0))
	var got []string
	for _, r := range rows {
		got = append(got, r.Account)
	}
	if want := "root idle2 idle1 late0 late1 late2"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s: booted ones in database order, then the rest by creation", got, want)
	}
}

// TestNodes: a removed user's usage stays with its account, a removed
// account's (and its users') with the nearest live ancestor account
// (Slurm 22.05+ leaf_usage); an id_assoc with no such account is not
// mapped.
func TestNodes(t *testing.T) {
	rows := []Assoc{
		{ID: 1, Account: "root"},
		{ID: 2, Account: "a", ParentAccount: "root", Shares: 1},
		{ID: 3, Account: "a", User: "u1", Shares: 1},
		{ID: 4, Account: "a", User: "gone", Shares: 1, Deleted: true},         // removed user: usage stays on a
		{ID: 5, Account: "old", ParentAccount: "a", Shares: 1, Deleted: true}, // removed account
		{ID: 6, Account: "old", User: "u3", Shares: 1, Deleted: true},
		{ID: 7, Account: "nowhere", User: "v", Shares: 1, Deleted: true},
	}
	tree, err := BuildTree(rows)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[uint32]int{1: 0, 2: 1, 3: 2, 4: 1, 5: 1, 6: 1}; !maps.Equal(nodes(rows, tree), want) {
		t.Errorf("nodes %v, want %v", nodes(rows, tree), want)
	}
}

// TestInheritedPriority: a NULL priority takes the nearest ancestor's, as
// slurmdbd hands associations to slurmctld (as_mysql_assoc.c).
func TestInheritedPriority(t *testing.T) {
	rows := []Assoc{
		{ID: 1, Account: "root"},
		{ID: 2, Account: "phys", ParentAccount: "root", Priority: 50, HasPriority: true},
		{ID: 3, Account: "theory", ParentAccount: "phys"},
		{ID: 4, Account: "theory", User: "alice"},
		{ID: 5, Account: "theory", User: "bob", Priority: 7, HasPriority: true},
		{ID: 6, Account: "chem", ParentAccount: "root"},
		{ID: 7, Account: "chem", User: "carol"},
		{ID: 8, Account: "gone", User: "dave"}, // no account row
	}
	got := InheritedPriority(rows)
	want := []uint32{0, 50, 50, 50, 7, 0, 0, 0}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
