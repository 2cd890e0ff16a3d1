package engine

import (
	"context"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// pendingJobs reads the jobs pending at at and what normalizes their
// factors: the cluster's TRES, QOS and association priorities, and
// slurm.conf's partitions. sprio leaves out jobs not yet eligible and held
// ones (priority 0); so does this.
func (e *Engine) pendingJobs(ctx context.Context, rd *dbRead, in *build.Inputs) (*build.Priorities, []slurmdbd.PendingJob, error) {
	at := in.Computed
	c := rd.cluster
	rows, err := c.PendingJobs(ctx, at)
	if err != nil {
		return nil, nil, err
	}
	if in.Name != e.conf.ClusterName || e.conf.PriorityType != "priority/multifactor" {
		// the weights in slurm.conf are its cluster's, and only
		// priority/multifactor weighs factors
		return nil, rows, nil
	}
	p := &build.Priorities{Config: e.conf.Priority()}
	tres, _, err := c.ClusterTRES(ctx, at)
	if err != nil {
		return nil, nil, err
	}
	names, qos := rd.tresNames, rd.qos
	clusterTRES := map[string]float64{}
	for _, t := range tres {
		clusterTRES[names[uint32(t[0])]] = float64(t[1])
	}
	p.Cluster.CPUs, p.Cluster.Nodes = clusterTRES["cpu"], clusterTRES["node"]
	for _, q := range qos {
		p.Cluster.MaxQOS = max(p.Cluster.MaxQOS, float64(q.Priority))
	}
	parts := map[string]slurmconf.Partition{}
	partTRES := map[string]map[string]float64{} // nil: unknown
	for _, pt := range e.conf.Partitions {
		parts[pt.Name] = pt
		p.Cluster.MaxPartition = max(p.Cluster.MaxPartition, float64(pt.PriorityJobFactor))
		if e.conf.AllNodes(pt) {
			partTRES[pt.Name] = clusterTRES
		}
	}
	for _, v := range rd.assocPriority {
		p.Cluster.MaxAssoc = max(p.Cluster.MaxAssoc, float64(v))
	}
	index := make(map[uint32]int, len(in.AssocIDs))
	for i, id := range in.AssocIDs {
		index[id] = i
	}
	for _, r := range rows {
		use := r.Eligible
		if p.Config.AccrueAlways {
			use = r.Submit
		}
		if r.Priority == 0 || use == 0 || use > at.Unix() {
			continue
		}
		j := build.PendingJob{ID: r.ID, ArrayTask: r.ArrayTask, Assoc: -1, Account: r.Account, QOS: qos[r.QOS].Name}
		j.Job = priority.Job{Submit: r.Submit, Eligible: r.Eligible, CPUs: float64(r.CPUs), Nodes: float64(r.Nodes),
			TimeLimit: float64(r.TimeLimit), QOSPriority: float64(qos[r.QOS].Priority)}
		if i, ok := index[r.Assoc]; ok {
			a := in.Tree.Association(i)
			j.Assoc, j.User = i, a.User
			if rd.assocPriority != nil {
				j.Job.AssocPriority = float64(rd.assocPriority[i])
			}
		}
		if counts, err := usage.TRESCounts(r.TRESReq); err == nil {
			j.Job.TRES = make(map[string]float64, len(counts))
			for _, t := range counts {
				j.Job.TRES[names[uint32(t[0])]] = float64(t[1])
			}
		}
		for _, name := range r.Partitions {
			j.Partition = name
			pt := parts[name]
			j.Job.PartitionFactor = float64(pt.PriorityJobFactor)
			j.Job.PartitionTRES = partTRES[name]
			j.Job.PartitionMaxTime = float64(pt.MaxTime)
			p.Jobs = append(p.Jobs, j)
		}
	}
	return p, rows, nil
}
