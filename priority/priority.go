// Package priority computes the multifactor priority of pending jobs as
// slurmctld's priority/multifactor plugin does (set_priority_factors and
// _get_priority_internal in src/plugins/priority/multifactor/
// priority_multifactor.c, 22.05): each factor normalized to [0, 1] unless
// a NO_NORMAL flag says otherwise, weighted, summed. It is pure
// computation: the fairshare factor comes from package fairshare, the rest
// from the database and slurm.conf.
package priority

import "math"

// Factor indexes Factors, in sprio's column order.
type Factor int

const (
	Age Factor = iota
	Assoc
	FairShare
	JobSize
	Partition
	QOS
	TRES
	NumFactors
)

var names = [NumFactors]string{"age", "assoc", "fairshare", "jobsize", "partition", "qos", "tres"}

func (f Factor) String() string { return names[f] }

// Slurm's markers for 32-bit values (slurm.h).
const (
	Infinite = 0xffffffff
	NoVal    = 0xfffffffe
)

// Factors holds one value per factor; TRES is the sum over the TRES.
type Factors [NumFactors]float64

// Config is slurm.conf's say in a job's priority.
type Config struct {
	// Weights are the PriorityWeight* settings; Weights[TRES] is the sum
	// of WeightTRES, for display only.
	Weights Factors
	// WeightTRES is PriorityWeightTRES by lower-case TRES name ("cpu",
	// "mem", "gres/gpu").
	WeightTRES map[string]float64
	// MaxAge is PriorityMaxAge in seconds.
	MaxAge int64
	// FavorSmall is PriorityFavorSmall.
	FavorSmall bool
	// The PriorityFlags that change a factor.
	AccrueAlways, SmallRelativeToTime                      bool
	NoNormalAssoc, NoNormalPart, NoNormalQOS, NoNormalTRES bool
	// EnforceLimits is AccountingStorageEnforce with limits: accrue limits
	// may then hold back the moment a job starts to age.
	EnforceLimits bool
}

// Cluster holds what the factors are normalized by.
type Cluster struct {
	// CPUs and Nodes are the cluster's totals (slurmctld's cluster_cpus
	// and node_record_count).
	CPUs, Nodes float64
	// MaxPartition is the largest PriorityJobFactor of any partition,
	// MaxQOS the largest QOS priority, MaxAssoc the largest association
	// priority.
	MaxPartition, MaxQOS, MaxAssoc float64
}

// Job is one pending job in one partition (a job submitted to several
// partitions has a priority in each).
type Job struct {
	// Submit and Eligible (begin time) are unix seconds.
	Submit, Eligible int64
	// CPUs and Nodes requested (minimum counts; 0 nodes counts as 1).
	CPUs, Nodes float64
	// TimeLimit in minutes as slurmctld holds it (Infinite; NoVal when
	// the job gave none: PartitionMaxTime counts then).
	TimeLimit, PartitionMaxTime float64
	// TRES requested by lower-case name.
	TRES map[string]float64
	// FairShare is the association's fairshare factor.
	FairShare float64
	// Priorities of the job's association (inherited as slurmdbd does),
	// partition (PriorityJobFactor) and QOS.
	AssocPriority, PartitionFactor, QOSPriority float64
	// PartitionTRES is the partition's TRES by lower-case name (nil:
	// unknown; the TRES factor is then NaN).
	PartitionTRES map[string]float64
}

// Result is a job's priority and how it came about.
type Result struct {
	// Normalized factors and the same multiplied by their weights.
	Normalized, Weighted Factors
	// TRES holds each weighted TRES's normalized factor by name.
	TRES map[string]float64
	// Priority is slurmctld's: the weighted sum, at least 1, truncated to
	// an integer. Site factor and nice are not in the database and count
	// as 0.
	Priority float64
	// Dominant is the factor that contributes most (-1 when none does).
	Dominant Factor
	// Accrue is when the job began to age; AccrueExact is false when
	// accrue limits may have held it back (it is then the eligible time).
	Accrue      int64
	AccrueExact bool
}

// Compute evaluates a job's factors as slurmctld's priority pass at unix
// time now does.
func (c *Config) Compute(cl *Cluster, j *Job, now int64) Result {
	r := Result{Dominant: -1}
	n := &r.Normalized
	r.Accrue, r.AccrueExact = c.accrue(j)
	if c.Weights[Age] > 0 && r.Accrue > 0 {
		n[Age] = 1
		if diff := now - r.Accrue; diff < c.MaxAge {
			n[Age] = float64(max(diff, 0)) / float64(c.MaxAge)
		}
	}
	if c.Weights[Assoc] > 0 {
		n[Assoc] = normal(j.AssocPriority, cl.MaxAssoc, c.NoNormalAssoc)
	}
	if c.Weights[FairShare] > 0 {
		n[FairShare] = j.FairShare
	}
	if c.Weights[JobSize] > 0 {
		n[JobSize] = c.jobSize(cl, j)
	}
	if c.Weights[Partition] > 0 && j.PartitionFactor != 0 {
		// partition_mgr.c starts the maximum at 1
		n[Partition] = normal(j.PartitionFactor, max(cl.MaxPartition, 1), c.NoNormalPart)
	}
	if c.Weights[QOS] > 0 && j.QOSPriority != 0 {
		n[QOS] = normal(j.QOSPriority, cl.MaxQOS, c.NoNormalQOS)
	}
	for f := Age; f < TRES; f++ {
		r.Weighted[f] = n[f] * c.Weights[f]
	}
	if len(c.WeightTRES) > 0 {
		r.TRES = make(map[string]float64, len(c.WeightTRES))
		for name, w := range c.WeightTRES {
			v := c.tres(j, name)
			r.TRES[name] = v
			n[TRES] += v
			r.Weighted[TRES] += v * w
		}
	}
	best := 0.0
	for f, v := range r.Weighted {
		r.Priority += v
		if v > best {
			best, r.Dominant = v, Factor(f)
		}
	}
	if !math.IsNaN(r.Priority) {
		r.Priority = math.Min(math.Trunc(math.Max(r.Priority, 1)), math.MaxUint32)
	}
	return r
}

// accrue is when a job starts to age (acct_policy_handle_accrue_time):
// its submission with ACCRUE_ALWAYS, its begin time without limits; with
// limits, accrue limits can hold it back past the begin time, and the
// database does not say.
func (c *Config) accrue(j *Job) (int64, bool) {
	if c.AccrueAlways {
		return j.Submit, true
	}
	return j.Eligible, !c.EnforceLimits
}

// jobSize is the share of the cluster's nodes and CPUs the job asks for
// (averaged), or of what it leaves free with PriorityFavorSmall; with
// SMALL_RELATIVE_TO_TIME, its CPUs per minute of time limit over the
// cluster's CPUs.
func (c *Config) jobSize(cl *Cluster, j *Job) float64 {
	if cl.CPUs <= 0 || cl.Nodes <= 0 {
		return math.NaN()
	}
	nodes := math.Max(j.Nodes, 1)
	var v float64
	switch {
	case c.SmallRelativeToTime:
		limit := j.TimeLimit
		if limit == NoVal {
			limit = j.PartitionMaxTime
		}
		if limit <= 0 {
			limit = 1
		}
		v = math.Max(nodes*cl.CPUs/cl.Nodes, j.CPUs) / limit / cl.CPUs
		if c.FavorSmall {
			v = 1 - v
		}
	case c.FavorSmall:
		v = (cl.Nodes - nodes) / cl.Nodes
		if j.CPUs > 0 {
			v = (v + (cl.CPUs-j.CPUs)/cl.CPUs) / 2
		}
	default:
		v = nodes / cl.Nodes
		if j.CPUs > 0 {
			v = (v + j.CPUs/cl.CPUs) / 2
		}
	}
	return math.Min(math.Max(v, 0), 1)
}

// tres is the job's request of one TRES over the partition's total.
func (c *Config) tres(j *Job, name string) float64 {
	req := j.TRES[name]
	switch {
	case c.NoNormalTRES:
		return req
	case j.PartitionTRES == nil:
		return math.NaN()
	case req == 0 || j.PartitionTRES[name] == 0:
		return 0
	}
	return req / j.PartitionTRES[name]
}

// normal is v over the largest of its kind, or v itself when a NO_NORMAL
// flag turns normalization off.
func normal(v, largest float64, raw bool) float64 {
	if raw {
		return v
	}
	if largest <= 0 {
		return 0
	}
	return v / largest
}
