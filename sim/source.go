package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// What the engine reads of the simulated slurmdbd (engine.Source and
// engine.ClusterSource), at the simulated clock's moment.

// Clusters is the one simulated cluster.
func (s *Cluster) Clusters(context.Context) ([]string, error) { return []string{Name}, nil }

// Cluster is the simulated cluster, by name.
func (s *Cluster) Cluster(_ context.Context, name string) (*Cluster, error) {
	if name != Name {
		return nil, fmt.Errorf("cluster %q is not simulated: expected %q", name, Name)
	}
	return s, nil
}

// Close closes nothing: the simulation goes on.
func (s *Cluster) Close() error { return nil }

// Refresh rebuilds usage at at from the tables as they stand.
func (s *Cluster) Refresh(_ context.Context, ref *slurmdbd.Refresher, at time.Time) (*slurmdbd.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at()
	snap, err := s.tables.Snapshot(at, ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.describe(), err)
	}
	return snap, nil
}

// SnapshotAsCtld is Refresh in the order slurmctld started at boot keeps
// the associations.
func (s *Cluster) SnapshotAsCtld(ctx context.Context, at, boot time.Time, passes fairshare.Passes, since time.Time, loc *time.Location) (*slurmdbd.Snapshot, error) {
	return s.Refresh(ctx, &slurmdbd.Refresher{Passes: passes, Since: since, Boot: boot, Location: loc}, at)
}

// PendingJobs are the jobs submitted and not started.
func (s *Cluster) PendingJobs(context.Context, time.Time) ([]slurmdbd.PendingJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at()
	var out []slurmdbd.PendingJob
	for _, u := range s.users {
		if !u.pending {
			continue
		}
		a := s.tree.Association(u.i)
		out = append(out, slurmdbd.PendingJob{ID: uint32(100000 + u.i), Assoc: uint32(u.i + 1), QOS: u.qos, User: u.uid, Account: a.Account,
			Partitions: []string{u.part}, Submit: u.submit, Eligible: u.submit, CPUs: u.cpus, Nodes: 1, TimeLimit: uint32(u.limit / 60),
			TRESReq: fmt.Sprintf("1=%d,4=1,5=%d", u.cpus, u.cpus), Priority: 1})
	}
	return out, nil
}

// ClusterTRES is the cluster's size: 64 nodes of 64 CPUs.
func (s *Cluster) ClusterTRES(context.Context, time.Time) ([][2]uint64, bool, error) {
	return [][2]uint64{{1, 4096}, {4, 64}, {5, 4096}}, true, nil
}

// RunningJobs are the jobs running at at.
func (s *Cluster) RunningJobs(_ context.Context, at time.Time) ([]slurmdbd.RunningJob, []error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at()
	t := at.Unix()
	var out []slurmdbd.RunningJob
	for _, u := range s.users {
		if !u.active {
			continue
		}
		j := s.tables.Jobs[u.job]
		if j.Start <= t {
			out = append(out, slurmdbd.RunningJob{Job: j, Billing: float64(u.cpus), LimitEnd: j.Start + u.limit})
		}
	}
	return out, nil, nil
}

// BillingUsage sums the rolled-up billing seconds of [from, to) per
// association.
func (s *Cluster) BillingUsage(_ context.Context, from, to time.Time) (map[uint32]float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at()
	out := map[uint32]float64{}
	s.hours(from.Unix(), to.Unix(), func(r usage.Row) { out[r.Assoc] += r.AllocSecs })
	return out, nil
}

// WindowUsage sums the rolled-up billing seconds of n windows of w before
// end, the last first.
func (s *Cluster) WindowUsage(_ context.Context, end time.Time, w time.Duration, n int) (map[uint32][]float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at()
	out := map[uint32][]float64{}
	e, ws := end.Unix(), int64(w.Seconds())
	s.hours(e-int64(n)*ws, e, func(r usage.Row) {
		if out[r.Assoc] == nil {
			out[r.Assoc] = make([]float64, n)
		}
		out[r.Assoc][(e-1-r.Start)/ws] += r.AllocSecs
	})
	return out, nil
}

func (s *Cluster) hours(from, to int64, add func(usage.Row)) {
	for _, r := range s.tables.Hours {
		if r.Start >= from && r.Start < to {
			add(r)
		}
	}
}

// Report is what sshare -a -l -P -m prints: RawUsage as slurmctld holds
// it (its last pass, and the jobs' ends charged since), truncated; the
// values slurmctld computes at a pass (normalized usage, effective usage,
// the factors) as of its last pass, by the algorithm it runs.
func (s *Cluster) Report(context.Context) (*shares.Table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at()
	live, err := s.withUsage(s.usage)
	if err != nil {
		return nil, err
	}
	pass, err := s.withUsage(s.atPass)
	if err != nil {
		return nil, err
	}
	vals := pass.FairTree()
	if s.faults[FaultPriorityFlags] {
		vals = pass.Classic(fairshare.ClassicOptions{Dampening: 1})
	}
	return shares.Of(live, vals), nil
}

// withUsage is the tree with users' usage u, accounts holding their
// subtree's sum.
func (s *Cluster) withUsage(u []float64) (*fairshare.Tree, error) {
	n := s.tree.Len()
	assocs := make([]fairshare.Association, n)
	for i := range n {
		assocs[i] = s.tree.Association(i)
		assocs[i].RawUsage = u[i]
	}
	for i := n - 1; i > 0; i-- { // parents come first
		assocs[assocs[i].Parent].RawUsage += assocs[i].RawUsage
	}
	t, err := fairshare.NewTree(assocs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.describe(), err)
	}
	return t, nil
}
