package collector

import (
	"math/rand/v2"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// DemoAssociations is the size of the demo cluster.
const DemoAssociations = 400

// Demo is a snapshot of a synthetic cluster, "demo", for serve --demo: a
// Fair Tree cluster of DemoAssociations associations with usage, whose
// reported side is the same tree with one user's RawUsage lost (as after a
// reset or lost state), so the drift metrics have something to show.
func Demo(now time.Time) *Snapshot {
	tree := fairshare.Synthetic(DemoAssociations, 4, 7)
	classic := tree.Classic(fairshare.ClassicOptions{Dampening: 1})
	ft := tree.FairTree()
	r := rand.New(rand.NewPCG(7, 7))
	tres := map[string][]float64{"cpu": make([]float64, tree.Len()), "mem": make([]float64, tree.Len())}
	lost := -1
	assocs := make([]fairshare.Association, tree.Len())
	for i := range assocs {
		a := tree.Association(i)
		tres["cpu"][i] = a.RawUsage * (0.8 + 0.2*r.Float64())
		tres["mem"][i] = a.RawUsage * 4096 * r.Float64()
		if lost < 0 && a.IsUser() && a.RawUsage > 0 {
			lost = i
			a.RawUsage = 0
		}
		assocs[i] = a
	}
	// Accounts hold their subtree's sum on the reported side too;
	// Synthetic lists parents first.
	for i := range assocs {
		if !assocs[i].IsUser() {
			assocs[i].RawUsage = 0
		}
	}
	for i := len(assocs) - 1; i > 0; i-- {
		assocs[assocs[i].Parent].RawUsage += assocs[i].RawUsage
	}
	reportedTree, err := fairshare.NewTree(assocs)
	if err != nil {
		panic(err)
	}
	reported := reportedTree.FairTree()
	rep := drift.Compare(fairshare.AlgorithmFairTree, 1e-6, drift.FromTree(reportedTree, reported, nil), drift.FromTree(tree, ft, nil))
	return &Snapshot{
		Clusters: []Cluster{{
			Name:       "demo",
			Algorithm:  fairshare.AlgorithmFairTree,
			Config:     Config{HalfLife: 7 * 24 * time.Hour, CalcPeriod: 5 * time.Minute, Dampening: 1, ResetPeriod: "NONE"},
			Assocs:     BuildAssocs(tree, classic, ft, tres, rep),
			LastRollup: now.Truncate(time.Hour),
			Drift:      rep,
		}},
		Sources:   map[string]Source{"db": {Up: true, LastSuccess: now}, "reported": {Up: true, LastSuccess: now}},
		Refreshed: now,
	}
}
