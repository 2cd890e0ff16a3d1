package build_test

import (
	"math"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
)

// TestJobPriorities: each job takes the configured algorithm's factor of
// its association, and the groups hold count, min, median (of an even
// count: the mean of the middle two) and max, and the dominant factors.
func TestJobPriorities(t *testing.T) {
	tree := fairshare.Synthetic(50, 3, 7)
	user := -1
	for i := range tree.Len() {
		if a := tree.Association(i); a.IsUser() {
			user = i
			break
		}
	}
	a := tree.Association(user)
	for _, alg := range []fairshare.Algorithm{fairshare.AlgorithmFairTree, fairshare.AlgorithmClassic} {
		in := inputs(tree, alg)
		p := &build.Priorities{}
		p.Config.Weights[priority.FairShare] = 1000
		p.Config.Weights[priority.QOS] = 500
		p.Cluster.MaxQOS = 10
		for _, qos := range []float64{0, 10, 10, 4} {
			p.Jobs = append(p.Jobs, build.PendingJob{ID: uint32(len(p.Jobs) + 1), Assoc: user, Account: a.Account, User: a.User, Partition: "p1", QOS: "normal",
				Job: priority.Job{QOSPriority: qos}})
		}
		p.Jobs = append(p.Jobs, build.PendingJob{ID: 9, Assoc: -1, Account: "gone", Partition: "p1", QOS: "normal"})
		in.Priorities, in.Detail = p, true
		cl, err := build.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := tree.Compute(alg, 1)
		fs := 1000 * vals[user].FairShare
		if got := cl.Jobs[0].Weighted[priority.FairShare]; math.Abs(got-fs) > 1e-9 {
			t.Errorf("%s: weighted fairshare %v, want %v", alg, got, fs)
		}
		if len(cl.Pending) != 2 || cl.Pending[0].Account != a.Account {
			t.Fatalf("%s: groups %+v", alg, cl.Pending)
		}
		g := cl.Pending[0]
		prios := []float64{math.Trunc(fs), math.Trunc(fs + 500), math.Trunc(fs + 500), math.Trunc(fs + 200)}
		if g.Jobs != 4 || g.Min != prios[0] || g.Max != prios[1] || g.Median != (prios[3]+prios[1])/2 {
			t.Errorf("%s: group %+v, priorities %v", alg, g, prios)
		}
		want := 0
		for _, p := range prios {
			if p-math.Trunc(fs) < fs {
				want++ // fairshare outweighs the QOS part
			}
		}
		if g.Dominant[priority.FairShare] != want {
			t.Errorf("%s: %d jobs dominated by fairshare, want %d", alg, g.Dominant[priority.FairShare], want)
		}
		// a job whose association is not in the tree has no fairshare
		if j := cl.Jobs[4]; !math.IsNaN(j.Priority) {
			t.Errorf("%s: job without association: priority %v, want NaN", alg, j.Priority)
		}
	}
}
