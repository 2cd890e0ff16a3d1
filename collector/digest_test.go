package collector

import (
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestPublishKeepsUnchangedAssociations: a snapshot whose association
// values are those of the last one (the refreshes between two decay
// passes) keeps the last rendering; any value that differs, NaN and a
// TRES included, renders again.
func TestPublishKeepsUnchangedAssociations(t *testing.T) {
	snap := func(mutate func(*result.Association)) *result.Snapshot {
		a := result.Association{Account: "a", User: "u", Parent: "a", Shares: 1, RawUsage: 10, TRES: []float64{1, 2},
			Classic: fairshare.Values{NormShares: 1, FairShare: 0.5, NormUsage: math.NaN()}, TicketBased: math.NaN(), Maui: math.NaN(),
			ReportedFactor: math.NaN(), ReportedUsage: math.NaN(), Uncharged: math.NaN()}
		if mutate != nil {
			mutate(&a)
		}
		return &result.Snapshot{Published: time.Now(), Clusters: []result.Cluster{{Name: "c", Algorithm: fairshare.AlgorithmClassic, Assocs: []result.Association{a}, TRESNames: []string{"cpu", "mem"}, Computed: time.Now()}}}
	}
	c := New()
	c.Extended = true
	c.Publish(snap(nil))
	first := c.enc.Load()
	c.Publish(snap(nil))
	if again := c.enc.Load(); &again.assocs[0] != &first.assocs[0] {
		t.Errorf("unchanged associations rendered again")
	}
	for name, m := range map[string]func(*result.Association){
		"usage":         func(a *result.Association) { a.RawUsage = 11 },
		"NaN to number": func(a *result.Association) { a.ReportedFactor = 0.3 },
		"TRES":          func(a *result.Association) { a.TRES = []float64{1, 3} },
		"rank":          func(a *result.Association) { a.FairTree.Rank = 2 },
		"parent":        func(a *result.Association) { a.Parent = "b" },
	} {
		c.Publish(snap(nil))
		before := c.enc.Load()
		c.Publish(snap(m))
		if after := c.enc.Load(); &after.assocs[0] == &before.assocs[0] {
			t.Errorf("%s changed: the last rendering was kept", name)
		}
	}
}

// TestPublishSharedAssociations: a snapshot that shares the last one's
// association slices is not hashed again (a value changed in place, which
// Publish does not allow, shows it), unless what else names the series
// changed.
func TestPublishSharedAssociations(t *testing.T) {
	assocs := []result.Association{{Account: "a", User: "u", Parent: "a", Shares: 1, RawUsage: 10}}
	snap := func(name string) *result.Snapshot {
		return &result.Snapshot{Published: time.Now(), Clusters: []result.Cluster{{Name: name, Algorithm: fairshare.AlgorithmClassic, Assocs: assocs}}}
	}
	c := New()
	c.Publish(snap("c"))
	first := c.enc.Load()
	assocs[0].RawUsage = 11
	c.Publish(snap("c"))
	if again := c.enc.Load(); &again.assocs[0] != &first.assocs[0] || again.digest != first.digest {
		t.Errorf("shared associations hashed and rendered again")
	}
	c.Publish(snap("d"))
	if renamed := c.enc.Load(); &renamed.assocs[0] == &first.assocs[0] {
		t.Errorf("cluster renamed: the last rendering was kept")
	}
}
