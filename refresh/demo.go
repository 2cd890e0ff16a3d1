package refresh

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// DemoAssociations is the default size of the demo cluster.
const DemoAssociations = 400

// Demo is a snapshot of a synthetic Fair Tree cluster, "demo", for serve
// --demo, built by the same code as a real one: the database side is a
// synthetic tree with usage; the reported side is what slurmctld would
// report for the same tree after losing one user's usage (as after a
// reset or lost state), so the drift metrics have something to show.
func Demo(now time.Time, n int) *result.Snapshot {
	cl, err := Build(demoInputs(now, n))
	if err != nil {
		panic(err)
	}
	return &result.Snapshot{
		Clusters:  []result.Cluster{cl},
		Sources:   map[string]result.Source{"db": {Up: true, LastSuccess: now}, "reported": {Up: true, LastSuccess: now}},
		Stages:    map[string]result.Stage{},
		Published: now,
	}
}

// demoInputs are the demo cluster's inputs, with a report.
func demoInputs(now time.Time, n int) *Inputs {
	tree := fairshare.Synthetic(n, 4, 7)
	n = tree.Len()
	r := rand.New(rand.NewPCG(7, 7))
	in := &Inputs{
		Name: "demo",
		Settings: Settings{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1,
			Config: result.Config{PriorityFlags: "", HalfLife: 7 * 24 * time.Hour, CalcPeriod: 5 * time.Minute, Dampening: 1, ResetPeriod: "NONE"}},
		Tree:          tree,
		TieOrderKnown: true,
		TRES:          map[string][]float64{"cpu": make([]float64, n), "mem": make([]float64, n)},
		Pending:       make([]bool, n),
		MauiUsage:     make([]float64, n),
		Maui:          fairshare.MauiConfig{Depth: 8, Decay: 1},
		LastRollup:    now.Truncate(time.Hour),
		Computed:      now,
		Tolerance:     drift.DefaultTolerance,
	}
	in.Priorities = &Priorities{Config: priority.Config{MaxAge: 7 * 86400, WeightTRES: map[string]float64{"cpu": 2000}},
		Cluster: priority.Cluster{CPUs: 4096, Nodes: 64, MaxPartition: 10, MaxQOS: 100}}
	pc := &in.Priorities.Config
	pc.Weights = priority.Factors{priority.Age: 1000, priority.FairShare: 100000, priority.JobSize: 1000, priority.Partition: 5000, priority.QOS: 10000, priority.TRES: 2000}
	assocs := make([]fairshare.Association, n)
	lost := -1
	root := tree.Association(tree.Root()).RawUsage
	for i := range assocs {
		a := tree.Association(i)
		in.TRES["cpu"][i] = a.RawUsage * (0.8 + 0.2*r.Float64())
		in.TRES["mem"][i] = a.RawUsage * 4096 * r.Float64()
		in.Pending[i] = a.IsUser() && r.IntN(4) == 0
		for k := 0; in.Pending[i] && k < 1+r.IntN(5); k++ {
			part, qos := "batch", "normal"
			if r.IntN(3) == 0 {
				part = "long"
			}
			if r.IntN(4) == 0 {
				qos = "high"
			}
			cpus := float64(int(1) << r.IntN(10))
			submit := now.Unix() - r.Int64N(3*86400)
			in.Priorities.Jobs = append(in.Priorities.Jobs, PendingJob{ID: uint32(1000 + len(in.Priorities.Jobs)), Assoc: i, Account: a.Account, User: a.User,
				Partition: part, QOS: qos, Job: priority.Job{Submit: submit, Eligible: submit, CPUs: cpus, Nodes: math.Ceil(cpus / 64),
					TRES: map[string]float64{"cpu": cpus}, PartitionTRES: map[string]float64{"cpu": 4096},
					PartitionFactor: map[string]float64{"batch": 10, "long": 2}[part], QOSPriority: map[string]float64{"normal": 10, "high": 100}[qos]}})
		}
		in.MauiUsage[i] = a.RawUsage / root
		if lost < 0 && a.IsUser() && a.RawUsage > 0 {
			lost = i
			a.RawUsage = 0
		}
		assocs[i] = a
	}
	sumSubtrees(assocs)
	reported, err := fairshare.NewTree(assocs)
	if err != nil {
		panic(err)
	}
	in.Report = &Report{Out: SshareOf(reported, reported.FairTree()), At: now}
	return in
}

// SshareOf is what `sshare -a -l -m -P` prints for a tree with the given
// Fair Tree values: rows depth-first, users before sub-accounts, RawUsage
// truncated, values at print precision.
func SshareOf(t *fairshare.Tree, vals []fairshare.Values) *sshare.Output {
	n := t.Len()
	children := make([][]int, n)
	for i := range n {
		if p := t.Association(i).Parent; p >= 0 {
			children[p] = append(children[p], i)
		}
	}
	out := &sshare.Output{Columns: sshare.Columns(true, true, true), Header: true}
	round := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	var walk func(i, depth int)
	walk = func(i, depth int) {
		a := t.Association(i)
		v := vals[i]
		out.Rows = append(out.Rows, sshare.Row{
			Line: len(out.Rows) + 2, Depth: depth, Account: a.Account, User: a.User, Partition: a.Partition,
			RawShares: a.Shares, HasShares: a.Parent >= 0, NormShares: round(v.NormShares), RawUsage: math.Trunc(a.RawUsage),
			NormUsage: round(v.NormUsage), EffectvUsage: round(v.EffectiveUsage), FairShare: round(v.FairShare), LevelFS: round(v.LevelFS),
		})
		for _, users := range []bool{true, false} {
			for _, c := range children[i] {
				if ca := t.Association(c); ca.IsUser() == users {
					walk(c, depth+1)
				}
			}
		}
	}
	walk(t.Root(), 0)
	return out
}

// sumSubtrees sets each account's RawUsage to the sum of its users', as
// slurmctld holds it; parents must come before their children.
func sumSubtrees(assocs []fairshare.Association) {
	for i := range assocs {
		if !assocs[i].IsUser() {
			assocs[i].RawUsage = 0
		}
	}
	for i := len(assocs) - 1; i > 0; i-- {
		assocs[assocs[i].Parent].RawUsage += assocs[i].RawUsage
	}
}
