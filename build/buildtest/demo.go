// Package buildtest is a fixed synthetic cluster built by package
// build, for the tests of build, collector and the alert rules: a
// fixture, not product code.
package buildtest

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Demo is one fixed snapshot of a synthetic Fair Tree cluster, "demo", for
// the collector's and the rules' tests and benchmarks (serve --demo runs
// the production loop over sim/ instead), built by the same code as a
// real one: the database side is a
// synthetic tree with usage; the reported side is what slurmctld would
// report for the same tree after losing one user's usage (as after a
// reset or lost state), so the drift metrics have something to show.
//
// The synthetic source goes through the stages of a refresh (config,
// connect, db, extras, reported, build, publish), each timed as the
// refresh loop times the real ones, so that the stage metrics show what
// they show on a real exporter: connect opens nothing, and publish is the
// snapshot's assembly (the collector renders it afterwards).
func Demo(now time.Time, n int) *result.Snapshot {
	stages := map[string]result.Stage{}
	stage := func(name string, run func()) {
		t0 := time.Now()
		run()
		stages[name] = result.Stage{Duration: time.Since(t0)}
	}
	in := demoSource(now, n, stage)
	var cl result.Cluster
	var err error
	stage(result.StageBuild, func() { cl, err = build.Build(in) })
	if err != nil {
		panic(err)
	}
	var snap *result.Snapshot
	stage(result.StagePublish, func() {
		snap = &result.Snapshot{
			Clusters:  []result.Cluster{cl},
			Sources:   map[string]result.Source{"db": {Up: true, LastSuccess: now}, "reported": {Up: true, LastSuccess: now}},
			ClusterUp: map[string]bool{in.Name: true},
			Published: now,
		}
	})
	snap.Stages = stages
	return snap
}

// Inputs are the demo cluster's inputs, with a report.
func Inputs(now time.Time, n int) *build.Inputs {
	return demoSource(now, n, func(_ string, run func()) { run() })
}

// demoSource makes the demo cluster's inputs stage by stage, as a refresh
// reads a real cluster's: stage runs each under its name.
func demoSource(now time.Time, n int, stage func(name string, run func())) *build.Inputs {
	pass := now.Truncate(5 * time.Minute)
	in := &build.Inputs{Name: "demo",
		Database: build.Database{TieOrderKnown: true, LastRollup: now.Truncate(time.Hour), Computed: now,
			// as read from slurmctld's state file
			Passes: fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: float64(pass.Unix())},
			Phase:  result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second, Last: pass}},
		Options: build.Options{Tolerance: drift.DefaultTolerance, Named: 10}}
	stage(result.StageConfig, func() {
		in.Settings = build.Settings{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1,
			Config: result.Config{PriorityFlags: "", HalfLife: 7 * 24 * time.Hour, CalcPeriod: 5 * time.Minute, Dampening: 1, ResetPeriod: "NONE"}}
		in.Maui = fairshare.MauiConfig{Depth: 8, Decay: 1}
		in.Priorities = &build.Priorities{Config: priority.Config{MaxAge: 7 * 86400, WeightTRES: map[string]float64{"cpu": 2000}},
			Cluster: priority.Cluster{CPUs: 4096, Nodes: 64, MaxPartition: 10, MaxQOS: 100}}
		pc := &in.Priorities.Config
		pc.Weights = priority.Factors{priority.Age: 1000, priority.FairShare: 100000, priority.JobSize: 1000, priority.Partition: 5000, priority.QOS: 10000, priority.TRES: 2000}
	})
	// the synthetic source needs no connection: its random streams are
	// what there is to open
	var usage, jobs *rand.Rand
	stage(result.StageConnect, func() { usage, jobs = rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 8)) })
	stage(result.StageDB, func() {
		in.Tree = fairshare.Synthetic(n, 4, 7)
		n = in.Tree.Len()
		in.TRES = map[string][]float64{"cpu": make([]float64, n), "mem": make([]float64, n)}
		for i := range n {
			a := in.Tree.Association(i)
			in.TRES["cpu"][i] = a.RawUsage * (0.8 + 0.2*usage.Float64())
			in.TRES["mem"][i] = a.RawUsage * 4096 * usage.Float64()
		}
	})
	stage(result.StageExtras, func() { demoPending(in, now, jobs) })
	stage(result.StageReported, func() {
		// slurmctld's view: one user's usage lost
		assocs := make([]fairshare.Association, n)
		lost := false
		for i := range assocs {
			a := in.Tree.Association(i)
			if !lost && a.IsUser() && a.RawUsage > 0 {
				lost = true
				a.RawUsage = 0
			}
			assocs[i] = a
		}
		SumSubtrees(assocs)
		reported, err := fairshare.NewTree(assocs)
		if err != nil {
			panic(err)
		}
		in.Reported = &build.Reported{Out: shares.Of(reported, reported.FairTree()), At: now}
	})
	return in
}

// demoPending gives a quarter of the demo's users pending jobs, and every
// association its share of the Maui windows.
func demoPending(in *build.Inputs, now time.Time, r *rand.Rand) {
	t := in.Tree
	n := t.Len()
	in.Pending = make([]bool, n)
	in.MauiUsage = make([]float64, n)
	root := t.Association(t.Root()).RawUsage
	for i := range n {
		a := t.Association(i)
		in.MauiUsage[i] = a.RawUsage / root
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
			in.Priorities.Jobs = append(in.Priorities.Jobs, build.PendingJob{ID: uint32(1000 + len(in.Priorities.Jobs)), Assoc: i, Account: a.Account, User: a.User,
				Partition: part, QOS: qos, Job: priority.Job{Submit: submit, Eligible: submit, CPUs: cpus, Nodes: math.Ceil(cpus / 64),
					TRES: map[string]float64{"cpu": cpus}, PartitionTRES: map[string]float64{"cpu": 4096},
					PartitionFactor: map[string]float64{"batch": 10, "long": 2}[part], QOSPriority: map[string]float64{"normal": 10, "high": 100}[qos]}})
		}
	}
}

// SumSubtrees sets each account's RawUsage to the sum of its users', as
// slurmctld holds it; parents must come before their children.
func SumSubtrees(assocs []fairshare.Association) {
	for i := range assocs {
		if !assocs[i].IsUser() {
			assocs[i].RawUsage = 0
		}
	}
	for i := len(assocs) - 1; i > 0; i-- {
		assocs[assocs[i].Parent].RawUsage += assocs[i].RawUsage
	}
}
