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
