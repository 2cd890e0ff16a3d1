package build

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
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
