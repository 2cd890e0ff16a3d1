package engine

import (
	"fmt"
	"sort"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// compareBilling compares the billing slurmctld recorded for each job that
// started at or after since (slurm.conf's last change: before it slurmctld
// may have billed by an older file, rightly) with what the rules give,
// per partition, sorted by name. slurmctld records its billing truncated
// to an integer (job_mgr.c job_set_alloc_tres), which a job matches when
// it is the truncation of the rules' value; jobs without a recorded
// billing are not checked.
func compareBilling(jobs []usage.Job, r usage.BillingRules, names map[uint32]string, since int64) []result.Billing {
	by := map[string]*result.Billing{}
	for _, j := range jobs {
		if j.Start < since {
			continue
		}
		counts, err := usage.TRESCounts(j.TRESAlloc)
		if err != nil {
			continue // the rebuild reports it
		}
		rec, ok := usage.BillingOf(counts)
		if !ok {
			continue
		}
		b := by[j.Partition]
		if b == nil {
			b = &result.Billing{Partition: j.Partition}
			by[j.Partition] = b
		}
		want := r.Billable(j.Partition, counts, names)
		b.Jobs++
		b.Recorded += float64(rec)
		b.Expected += usage.Truncated(want)
		if !usage.Truncates(want, rec) {
			b.Mismatched++
			if b.Example == nil {
				b.Example = &result.BillingExample{Job: j.ID, Recorded: float64(rec), Expected: want}
			}
		}
	}
	out := make([]result.Billing, 0, len(by))
	for _, b := range by {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Partition < out[k].Partition })
	return out
}

// billingRules is how conf says jobs are billed.
func billingRules(conf *slurmconf.Config) usage.BillingRules {
	r := usage.BillingRules{Weights: map[string]map[string]float64{}, MaxTRES: conf.PriorityFlags&slurmconf.FlagMaxTRES != 0,
		MaxGRES: conf.PriorityFlags&slurmconf.FlagMaxTRESGRES != 0, Since: conf.ModTime.Unix()}
	for _, p := range conf.Partitions {
		r.Weights[p.Name] = p.Billing
	}
	return r
}

// checkBilling checks the billing of the jobs read (compareBilling) by
// conf's rules (billingRules) and returns a problem per partition where
// slurmctld billed otherwise.
func checkBilling(in *build.Inputs, jobs []usage.Job, names map[uint32]string, conf *slurmconf.Config, rules usage.BillingRules) (problems []problem) {
	in.Billing = compareBilling(jobs, rules, names, conf.ModTime.Unix())
	for _, b := range in.Billing {
		if x := b.Example; x != nil {
			problems = append(problems, problem{"billing of partition " + b.Partition, fmt.Sprintf(
				"partition %q: %d of %d jobs started since slurm.conf last changed (%s) were billed other than its TRESBillingWeights and PriorityFlags give, e.g. job %d billed %g, slurm.conf gives %g: slurmctld runs with other weights (slurm.conf edited but not reconfigured, scontrol update partition, or another copy of slurm.conf)",
				b.Partition, b.Mismatched, b.Jobs, conf.ModTime.Format(time.RFC3339), x.Job, x.Recorded, x.Expected)})
		}
	}
	return problems
}
