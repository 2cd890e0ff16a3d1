package engine

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// PendingJob is one pending job in one partition, ready for
// priority.Compute but for its fairshare factor, which Build adds.
type PendingJob struct {
	ID        uint32
	ArrayTask string
	// Assoc indexes Inputs.Tree (-1: not in it).
	Assoc          int
	Account, User  string
	Partition, QOS string
	Job            priority.Job
}

// Priorities are what Build needs to compute pending jobs' priorities.
type Priorities struct {
	Config  priority.Config
	Cluster priority.Cluster
	Jobs    []PendingJob
}

// pendingJobs reads the jobs pending at at and what normalizes their
// factors: the cluster's TRES, QOS and association priorities, and
// slurm.conf's partitions. sprio leaves out jobs not yet eligible and held
// ones (priority 0); so does this.
func (e *Engine) pendingJobs(ctx context.Context, c ClusterSource, in *Inputs) (*Priorities, []slurmdbd.PendingJob, error) {
	at := in.Computed
	rows, err := c.PendingJobs(ctx, at)
	if err != nil {
		return nil, nil, err
	}
	if in.Name != e.conf.ClusterName || e.conf.PriorityType != "priority/multifactor" {
		// the weights in slurm.conf are its cluster's, and only
		// priority/multifactor weighs factors
		return nil, rows, nil
	}
	p := &Priorities{Config: e.conf.Priority()}
	tres, _, err := c.ClusterTRES(ctx, at)
	if err != nil {
		return nil, nil, err
	}
	names, qos := in.tresNames, in.qos
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
	for _, v := range in.assocPriority {
		p.Cluster.MaxAssoc = max(p.Cluster.MaxAssoc, float64(v))
	}
	index := make(map[uint32]int, len(in.assocIDs))
	for i, id := range in.assocIDs {
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
		j := PendingJob{ID: r.ID, ArrayTask: r.ArrayTask, Assoc: -1, Account: r.Account, QOS: qos[r.QOS].Name}
		j.Job = priority.Job{Submit: r.Submit, Eligible: r.Eligible, CPUs: float64(r.CPUs), Nodes: float64(r.Nodes),
			TimeLimit: float64(r.TimeLimit), QOSPriority: float64(qos[r.QOS].Priority)}
		if i, ok := index[r.Assoc]; ok {
			a := in.Tree.Association(i)
			j.Assoc, j.User = i, a.User
			if in.assocPriority != nil {
				j.Job.AssocPriority = float64(in.assocPriority[i])
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

// jobPriorities computes each pending job's priority with the fairshare
// factor of the configured algorithm, and sums them up by account,
// partition and QOS.
func jobPriorities(in *Inputs, assocs []result.Association) ([]result.Job, []result.PendingGroup) {
	p := in.Priorities
	if p == nil {
		return nil, nil
	}
	fairTree := in.Settings.Algorithm == fairshare.AlgorithmFairTree
	// sprio shows what slurmctld's last priority pass computed, at its
	// last decay pass: there where that is known
	at := in.Computed.Unix()
	if !in.Phase.Last.IsZero() {
		at = in.Phase.Last.Unix()
	}
	window := int64(math.Ceil(in.PassError(nil).Window))
	jobs := make([]result.Job, len(p.Jobs))
	type key struct{ account, partition, qos string }
	groups := map[key][]int{}
	for i := range p.Jobs {
		pj := &p.Jobs[i]
		j := pj.Job
		j.FairShare = math.NaN() // not in the tree: unknown
		if a := pj.Assoc; a >= 0 {
			v := assocs[a].Classic
			if fairTree {
				v = assocs[a].FairTree
			}
			j.FairShare = v.FairShare
		}
		jobs[i] = result.Job{ID: pj.ID, ArrayTask: pj.ArrayTask, Account: pj.Account, User: pj.User, Partition: pj.Partition, QOS: pj.QOS,
			Submit: j.Submit, Result: p.Config.Compute(&p.Cluster, &j, at)}
		if in.Detail {
			// every factor rises with the fairshare factor and the age:
			// the ends are the range's ends
			low, high := j, j
			if a := pj.Assoc; a >= 0 && assocs[a].Range != nil {
				r := assocs[a].Range.Classic
				if fairTree {
					r = assocs[a].Range.FairTree
				}
				low.FairShare, high.FairShare = r[0], r[1]
			}
			jobs[i].Range = &result.JobRange{Low: p.Config.Compute(&p.Cluster, &low, at-window),
				High: p.Config.Compute(&p.Cluster, &high, min(at+window, in.Computed.Unix()))}
		}
		if pj.Assoc >= 0 {
			jobs[i].AssocID = assocs[pj.Assoc].ID
		}
		k := key{pj.Account, pj.Partition, pj.QOS}
		groups[k] = append(groups[k], i)
	}
	out := make([]result.PendingGroup, 0, len(groups))
	for k, idx := range groups {
		g := result.PendingGroup{Account: k.account, Partition: k.partition, QOS: k.qos, Jobs: len(idx)}
		prios := make([]float64, len(idx))
		for n, i := range idx {
			prios[n] = jobs[i].Priority
			if d := jobs[i].Dominant; d >= 0 {
				g.Dominant[d]++
			}
		}
		slices.Sort(prios)
		g.Min, g.Max = prios[0], prios[len(prios)-1]
		g.Median = prios[len(prios)/2]
		if len(prios)%2 == 0 {
			g.Median = (prios[len(prios)/2-1] + g.Median) / 2
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b result.PendingGroup) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.Partition, b.Partition), strings.Compare(a.QOS, b.QOS))
	})
	if !in.Detail {
		jobs = nil
	}
	return jobs, out
}
