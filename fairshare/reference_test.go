package fairshare

import (
	"math"
	"testing"
)

// docTree is the example of the classic fairshare document
// (../shared/reference/slurm-classic-fairshare.txt, Figure 3), reused by the
// ticket-based document: A(40){B(30){user1}, C(10){user2, user3}},
// D(60){E(25){user4}, F(35){user5}}, usage 0.2, 0.25 and 0.25 for users 1, 2
// and 4. The document's normalized usage is a share of the whole machine,
// so root holds usage 1 (the rest as an account's own usage, which Slurm
// allows for removed users). withRootUser adds the root user association
// real Slurm has, with 1 share; the document has none.
func docTree(t *testing.T, withRootUser bool) (*Tree, map[string]int) {
	t.Helper()
	type n struct {
		acct, user, parent string
		shares             uint32
		raw                float64
	}
	nodes := []n{
		{"root", "", "", 1, 1},
		{"A", "", "root", 40, 0.45}, {"B", "", "A", 30, 0.2}, {"C", "", "A", 10, 0.25},
		{"B", "user1", "B", 1, 0.2}, {"C", "user2", "C", 1, 0.25}, {"C", "user3", "C", 1, 0},
		{"D", "", "root", 60, 0.25}, {"E", "", "D", 25, 0.25}, {"F", "", "D", 35, 0},
		{"E", "user4", "E", 1, 0.25}, {"F", "user5", "F", 1, 0},
	}
	if withRootUser {
		nodes = append(nodes, n{"root", "root", "root", 1, 0})
	}
	idx := map[string]int{}
	var assocs []Association
	for i, x := range nodes {
		name := x.acct
		if x.user != "" {
			name = x.user
		}
		p := -1
		if x.parent != "" {
			p = idx[x.parent]
		}
		if _, dup := idx[name]; !dup {
			idx[name] = i
		}
		assocs = append(assocs, Association{Account: x.acct, User: x.user, Parent: p, Shares: x.shares, RawUsage: x.raw})
	}
	tree, err := NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	return tree, idx
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if !(math.Abs(got-want) <= tol) {
		t.Errorf("%s = %.9g, want %.9g (±%g)", what, got, want, tol)
	}
}

// TestClassicDocumentExample reproduces every number of the classic
// document's example. The document prints UE of F as 0.1458 and uses it
// for user 5's factor, hence the looser tolerance there.
func TestClassicDocumentExample(t *testing.T) {
	tree, ix := docTree(t, false)
	v := tree.Classic(ClassicOptions{})
	for name, sn := range map[string]float64{"A": 0.4, "D": 0.6, "B": 0.3, "user1": 0.3, "user2": 0.05, "user3": 0.05, "user4": 0.25, "user5": 0.35} {
		near(t, name+" NormShares", v[ix[name]].NormShares, sn, 1e-12)
	}
	for name, ue := range map[string]float64{"A": 0.45, "D": 0.25, "B": 0.3875, "C": 0.3, "E": 0.25, "F": 0.1458,
		"user1": 0.3875, "user2": 0.275, "user3": 0.15, "user4": 0.25, "user5": 0.1458} {
		near(t, name+" EffectvUsage", v[ix[name]].EffectiveUsage, ue, 5e-5)
	}
	for name, fs := range map[string]float64{"user1": 0.408479, "user2": 0.022097, "user3": 0.125, "user4": 0.5} {
		near(t, name+" FairShare", v[ix[name]].FairShare, fs, 1e-6)
	}
	near(t, "user5 FairShare", v[ix["user5"]].FairShare, 0.749154, 2e-5)
	// "if user 2 had been allocated 4 shares instead of 1, user 2 would
	// have had .08 normalized shares"
	a := append([]Association(nil), tree.assocs...)
	a[ix["user2"]].Shares = 4
	t2, err := NewTree(a)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "user2 NormShares with 4 shares", t2.Classic(ClassicOptions{})[ix["user2"]].NormShares, 0.08, 1e-12)
}

// TestClassicRealSlurmRootUser: real Slurm 22.05 gives root a user
// association with 1 share that competes with the top-level accounts, so
// the document's A = 0.4 becomes 40/101 on a real cluster.
func TestClassicRealSlurmRootUser(t *testing.T) {
	tree, ix := docTree(t, true)
	v := tree.Classic(ClassicOptions{})
	near(t, "A NormShares", v[ix["A"]].NormShares, 40.0/101, 1e-12)
	near(t, "user1 NormShares", v[ix["user1"]].NormShares, 40.0/101*0.75, 1e-12)
	near(t, "root user NormShares", v[len(v)-1].NormShares, 1.0/101, 1e-12)
}

func TestClassicDampening(t *testing.T) {
	tree, ix := docTree(t, false)
	v := tree.Classic(ClassicOptions{Dampening: 2})
	// 2^(-UE/S/d): user 4 has UE = S, so 2^(-1/2).
	near(t, "user4 FairShare, dampening 2", v[ix["user4"]].FairShare, math.Sqrt(0.5), 1e-12)
	near(t, "root FairShare, dampening 2", v[tree.Root()].FairShare, math.Sqrt(0.5), 1e-12)
}

// TestTicketBasedDocumentExample reproduces the ticket-based document:
// only users 2 and 5 have pending jobs; A gets 198 and D 802 of 1000
// tickets, and user 2's PriorityFS is 198/802 = 0.25.
func TestTicketBasedDocumentExample(t *testing.T) {
	tree, ix := docTree(t, false)
	active := make([]bool, tree.Len())
	active[ix["user2"]], active[ix["user5"]] = true, true
	v, tickets := tree.TicketBased(active, 1)
	per1000 := func(name string) float64 { return tickets[ix[name]] / rootTickets * 1000 }
	near(t, "A tickets per 1000", per1000("A"), 198, 0.5)
	near(t, "D tickets per 1000", per1000("D"), 802, 0.5)
	near(t, "C tickets per 1000", per1000("C"), 198, 0.5)
	near(t, "user2 tickets per 1000", per1000("user2"), 198, 0.5)
	near(t, "user5 tickets per 1000", per1000("user5"), 802, 0.5)
	near(t, "user5 PriorityFS", v[ix["user5"]].FairShare, 1, 0)
	near(t, "user2 PriorityFS", v[ix["user2"]].FairShare, 0.25, 0.005)
	for _, name := range []string{"B", "E", "user1", "user3", "user4"} {
		if tickets[ix[name]] != 0 || v[ix[name]].FairShare != 0 {
			t.Errorf("%s is inactive but has %v tickets, FairShare %v", name, tickets[ix[name]], v[ix[name]].FairShare)
		}
	}
	// The document's factors F = S/max(U, 0.01 s) for the nodes whose
	// usage is above 1% of their share.
	ticketF := func(name string) float64 { return v[ix[name]].NormShares / v[ix[name]].EffectiveUsage }
	near(t, "A factor", ticketF("A"), 0.4/0.45, 1e-12)
	near(t, "D factor", ticketF("D"), 2.4, 1e-12)
	near(t, "user1 factor", ticketF("user1"), 1.5, 1e-12)
	near(t, "user2 factor", ticketF("user2"), 0.2, 1e-12)
}

// TestTicketBasedSourceDiffersFromDocument: for idle nodes the document
// floors effective usage at 1% of the normalized (machine-wide) share,
// giving F = 100; Slurm 14.11's _ticket_based_set_usage_efctv floors it at
// 1% of the share among siblings (shares_raw/level_shares), so account F
// (35 of 60) gets 0.35/(0.01·35/60) = 60 and user 5 (1 of 1) 35. The
// document's example outcome does not depend on it; we follow the source.
func TestTicketBasedSourceDiffersFromDocument(t *testing.T) {
	tree, ix := docTree(t, false)
	active := make([]bool, tree.Len())
	active[ix["user5"]] = true
	v, _ := tree.TicketBased(active, 1)
	f := func(name string) float64 { return v[ix[name]].NormShares / v[ix[name]].EffectiveUsage }
	near(t, "F factor (document: 100)", f("F"), 60, 1e-9)
	near(t, "user5 factor (document: 100)", f("user5"), 35, 1e-9)
	near(t, "user3 factor (document: 100)", f("user3"), 10, 1e-9)
}

// TestMauiDocumentExample is the "John" example of the Maui guide, 6.3.2.3:
// FSINTERVAL 12:00:00, FSDEPTH 4, FSDECAY 0.5.
func TestMauiDocumentExample(t *testing.T) {
	c := MauiConfig{Depth: 4, Decay: 0.5}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	john := []float64{60, 0, 10, 50}
	total := []float64{110, 125, 100, 150}
	want := (60 + .5*0 + .25*10 + .125*50) / (110 + .5*125 + .25*100 + .125*150)
	near(t, "John's usage", MauiUsage(john, total, c), want, 1e-15)
	near(t, "John's usage", MauiUsage(john, total, c), 0.3179190751, 1e-10)
	// Windows beyond FSDEPTH do not count.
	near(t, "depth 2", MauiUsage(john, total, MauiConfig{Depth: 2, Decay: 0.5}), 60/172.5, 1e-15)
	// The decay table of 6.3.2.2: window 3 at FSDECAY 0.75 weighs 42%.
	near(t, "decay 0.75, window 3", MauiUsage([]float64{0, 0, 0, 1}, []float64{1}, MauiConfig{Depth: 4, Decay: 0.75}), 0.421875, 1e-15)
}

func TestMauiTargets(t *testing.T) {
	diff := MauiConfig{Depth: 1, Decay: 1}
	ratio := MauiConfig{Depth: 1, Decay: 1, Ratio: true}
	u := 0.3179190751
	for _, tc := range []struct {
		name   string
		target float64
		kind   TargetKind
		c      MauiConfig
		want   float64
	}{
		{"target above usage, difference", 0.4, Target, diff, 0.4 - u},
		{"target below usage, difference", 0.2, Target, diff, 0.2 - u},
		{"cap, under it", 0.4, Cap, diff, 0},
		{"cap, over it", 0.2, Cap, diff, 0.2 - u},
		{"floor, under it", 0.4, Floor, diff, 0.4 - u},
		{"floor, over it", 0.2, Floor, diff, 0},
		{"ratio", 0.4, Target, ratio, 1 - u/0.4},
		{"ratio cap, under it", 0.4, Cap, ratio, 0},
		{"ratio floor, over it", 0.2, Floor, ratio, 0},
	} {
		near(t, tc.name, MauiComponent(u, tc.target, tc.kind, tc.c), tc.want, 1e-15)
	}
	if v := MauiComponent(u, 0, Target, ratio); !math.IsNaN(v) {
		t.Errorf("ratio against a zero target = %v, want NaN", v)
	}
	for _, bad := range []MauiConfig{{Depth: 0, Decay: 1}, {Depth: 1, Decay: 0}, {Depth: 1, Decay: 1.5}, {Depth: 1, Decay: math.NaN()}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
