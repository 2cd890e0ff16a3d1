package usage

import (
	"math"
	"strings"
)

// BillingRules is how slurm.conf says jobs are billed: each partition's
// TRESBillingWeights by lower-case TRES name (nil: the job's CPUs) and the
// PriorityFlags that take the largest node TRES instead of their sum.
type BillingRules struct {
	Weights          map[string]map[string]float64
	MaxTRES, MaxGRES bool
	// Since is when slurm.conf last changed (unix seconds): a job that
	// started before it may have been billed by the PriorityFlags
	// slurm.conf held then, and two can truncate to one record (4 CPUs and
	// 3 GB at Mem=0.25G: 4.75 summed, 4 with MAX_TRES, both recorded 4).
	Since int64
}

// Billable is what slurmctld bills a job for the TRES counts (id and
// count, as in tres_alloc) under the partition's weights, names giving the
// TRES names by id (assoc_mgr.c assoc_mgr_tres_weighted; job_mgr.c
// calc_job_billable_tres): without weights the CPUs; with them the sum of
// each count times its weight, billing itself left out, except that
// MAX_TRES takes the largest of CPU, memory, nodes and each GRES, and
// MAX_TRES_GRES that largest of CPU, memory and nodes plus every GRES.
// Energy is left out: slurmctld has no count of it at the job's start.
func (r BillingRules) Billable(partition string, counts [][2]uint64, names map[uint32]string) float64 {
	w := r.Weights[partition]
	if w == nil {
		for _, c := range counts {
			if c[0] == TRESCPU {
				return float64(c[1])
			}
		}
		return 0
	}
	var node, gres, global float64
	for _, c := range counts {
		if c[0] == TRESBilling || c[0] == TRESEnergy {
			continue
		}
		name := strings.ToLower(names[uint32(c[0])])
		v := float64(c[1]) * w[name]
		isGRES := strings.HasPrefix(name, "gres/")
		switch {
		case r.MaxGRES && isGRES:
			gres += v
		case (r.MaxTRES || r.MaxGRES) && (c[0] == TRESCPU || c[0] == TRESMem || c[0] == TRESNode || isGRES):
			node = math.Max(node, v)
		default:
			global += v
		}
	}
	return node + gres + global
}

// Truncated is the billing slurmctld records for a billable of want: its
// truncation (job_mgr.c job_set_alloc_tres), the rules' value computed in
// another order landing a hair below an integer taken as that integer.
func Truncated(want float64) float64 { return math.Floor(want + truncEps(want)) }

// Truncates says whether billing rec is what slurmctld records for a
// billable of want (Truncated), or the truncation of a value a hair above
// an integer computed as one.
func Truncates(want float64, rec uint64) bool {
	return float64(rec) == Truncated(want) || float64(rec) == math.Floor(want-truncEps(want))
}

func truncEps(want float64) float64 { return 1e-9 * math.Max(1, want) }

// Price sets each job's Billed to the billing slurmctld charges it, a
// double (calc_job_billable_tres), where the rules' value truncates to the
// billing slurmctld recorded: those are the rules it billed the job by. A
// job that started before the rules (Since), in a partition with weights,
// may have been billed by other PriorityFlags: it is charged the middle of
// the flags' values that truncate to its record, Spread half their range
// (a loss hides behind what the charge may be off by). A job whose record no rule gives (weights changed since it
// started, a TRES the exporter cannot price) keeps its record, Spread one
// unit, and is returned: what slurmctld charged lies within one unit above
// it. Jobs without a recorded billing are left as they are.
func (r BillingRules) Price(jobs []Job, names map[uint32]string) (unpriced []Job) {
	for i := range jobs {
		j := &jobs[i]
		counts, err := TRESCounts(j.TRESAlloc)
		if err != nil {
			continue // the rebuild reports it
		}
		rec, ok := BillingOf(counts)
		if !ok {
			continue
		}
		low, high := math.Inf(1), math.Inf(-1)
		variants := []BillingRules{r}
		if j.Start < r.Since && r.Weights[j.Partition] != nil {
			variants = append(variants, BillingRules{Weights: r.Weights}, BillingRules{Weights: r.Weights, MaxTRES: true},
				BillingRules{Weights: r.Weights, MaxGRES: true})
		}
		for _, v := range variants {
			if want := v.Billable(j.Partition, counts, names); Truncates(want, rec) {
				low, high = math.Min(low, want), math.Max(high, want)
			}
		}
		if high < low {
			j.Spread = 1
			unpriced = append(unpriced, *j)
			continue
		}
		j.Billed, j.Priced, j.Spread = (low+high)/2, true, (high-low)/2
	}
	return unpriced
}

// BillingOf is the billing a TRES list records.
func BillingOf(counts [][2]uint64) (uint64, bool) {
	for _, c := range counts {
		if c[0] == TRESBilling {
			return c[1], true
		}
	}
	return 0, false
}
