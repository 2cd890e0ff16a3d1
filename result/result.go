// Package result is what computing a cluster gives: the values the
// collector renders as metrics and the explain command walks. Plain data:
// neither computing nor explaining depends on how it is rendered.
package result

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
)

// Association is one association's computed values, as of the refresh.
type Association struct {
	// ID is id_assoc in the database (0 where there is none: the demo);
	// jobs refer to their association by it, so that dropping
	// associations for the series budget cannot point a job at another.
	ID                               uint32
	Account, User, Partition, Parent string
	Shares                           uint32
	// RawUsage is the decayed billing usage rebuilt from the database;
	// TRES the same per TRES, named by Cluster.TRESNames (nil: none).
	RawUsage float64
	TRES     []float64
	Classic  fairshare.Values
	FairTree fairshare.Values
	// TicketBased and Maui are the what-if factors (NaN when not computed).
	TicketBased float64
	Maui        float64
	// ReportedFactor and ReportedUsage are what Slurm reports, NaN when no
	// report is fresh or the association is not in it.
	ReportedFactor float64
	ReportedUsage  float64
	// Uncharged is decayed usage slurmdbd recorded and slurmctld never
	// charged (NaN when unknown).
	Uncharged float64
	// Range is, when asked for (explain), each factor over every moment
	// slurmctld's last decay pass may have fallen at (nil: not asked).
	Range *FactorRange
	// Recovery is Recovery.Seconds of a user association (NaN: none).
	Recovery float64
}

// AssocKey names an association across refreshes and sources (the
// database's tree, what Slurm reports), whose trees may differ. Account
// names are unique in Slurm, so an account is its name with no user.
type AssocKey struct {
	Account, User, Partition string
}

// KeyOf is the key of the association of account, user and partition.
func KeyOf(account, user, partition string) AssocKey { return AssocKey{account, user, partition} }

// Recovery is how long each user association's factor takes to reach its
// fair level under the forecast's default assumption (docs/forecast.md),
// as of Computed: 0 when it is already at or above it, +Inf when not
// within the horizon. It is computed less often than the factors.
type Recovery struct {
	Computed time.Time
	Seconds  map[AssocKey]float64
}

// FactorRange is the lowest and highest classic and Fair Tree factor
// (NaN where the factor is blank).
type FactorRange struct {
	Classic, FairTree [2]float64
}

// Config is what the config_info metric says about a cluster.
type Config struct {
	PriorityFlags string
	HalfLife      time.Duration
	CalcPeriod    time.Duration
	Dampening     uint16
	ResetPeriod   string
}

// Drift kinds: formula drift is Slurm's factors against the algorithms
// replayed on Slurm's own usage; usage drift is the database's usage
// against Slurm's, and what that difference does to the factors.
const (
	DriftFormula = "formula"
	DriftUsage   = "usage"
)

// Drift is one kind of drift of one value over a cluster.
type Drift struct {
	Kind, Value string
	// Max is the largest absolute drift, Beyond how many associations
	// drift by more than allowed. Bound is the largest drift the
	// inputs' unknowns explain (in Max's units; +Inf: some value cannot
	// be judged).
	Max, Bound float64
	Beyond     int
}

// Phase is what is known of the moment of slurmctld's decay passes: the
// one description serve publishes, check prints and explain shows.
type Phase struct {
	// Source is PhaseStateFile, PhaseInferred, PhaseBoot or PhaseUnknown.
	Source string
	// Uncertainty is how far slurmctld's last pass and the one the
	// database's usage was rebuilt for may be apart: the whole
	// PriorityCalcPeriod when unknown.
	Uncertainty time.Duration
	// Last is slurmctld's last pass before the compared report, as far
	// as known (zero when the phase is unknown).
	Last time.Time
}

// phaseJSON is Phase as check and explain print it.
type phaseJSON struct {
	Source      string  `json:"source"`
	Uncertainty float64 `json:"uncertainty_seconds"`
}

func (p Phase) MarshalJSON() ([]byte, error) {
	return json.Marshal(phaseJSON{p.Source, p.Uncertainty.Seconds()})
}

func (p *Phase) UnmarshalJSON(b []byte) error {
	var j phaseJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Phase{Source: j.Source, Uncertainty: time.Duration(j.Uncertainty * float64(time.Second))}
	return nil
}

// Describe says where the values come from in words, for tables.
func (p Phase) Describe() string {
	u := p.Uncertainty.Seconds()
	switch p.Source {
	case PhaseStateFile:
		return fmt.Sprintf("over slurmctld's last decay pass, read from its state (±%gs)", u)
	case PhaseInferred:
		return fmt.Sprintf("over the moments slurmctld's last decay pass may have fallen at, inferred from its reports (±%gs)", u)
	case PhaseBoot:
		return fmt.Sprintf("over the moments slurmctld's last decay pass may have fallen at, from its boot time (±%gs)", u)
	}
	return fmt.Sprintf("over every moment slurmctld's last decay pass may have fallen at (its phase unknown: the last %gs)", u)
}

// UsageBound is what a RawUsage bound is made of, in billing-seconds:
// why the database's usage and slurmctld's may differ without a fault
// (check's JSON, explain).
type UsageBound struct {
	// Decay is the whole usage decayed between the two pass moments the
	// phase allows (the same factor on every association: it cancels in
	// every ratio the factors take).
	Decay float64 `json:"decay"`
	// Running is the charge of the jobs that ran in the last period
	// over that window.
	Running float64 `json:"running_jobs"`
	// Unrecorded is the charge of job ends slurmctld made that slurmdbd
	// has not recorded yet (AccountingStorageEnforce=limits).
	Unrecorded float64 `json:"unrecorded_ends"`
	// Tails are finished jobs' uncharged tails, by the boot whose passes
	// cut them, and those a pass's wait for the job lock lost (without
	// limits).
	Tails float64 `json:"tails"`
	// EarlierBoots is what the passes of slurmctld's boots before its
	// last start leave unknown of the usage they charged, whose phase is
	// not kept.
	EarlierBoots float64 `json:"earlier_boots"`
	// Unpriced is what slurmctld may have charged beyond the billing it
	// recorded, truncated, of jobs billed by other weights than
	// slurm.conf's (weights changed since they started).
	Unpriced float64 `json:"unpriced_billing"`
	// Truncation is sshare's integer RawUsage.
	Truncation float64 `json:"truncation"`
}

// Total is the bound.
func (b UsageBound) Total() float64 {
	return b.Decay + b.Running + b.Unrecorded + b.Tails + b.EarlierBoots + b.Unpriced + b.Truncation
}

// Kinds of usage loss (Losses).
const (
	// LossBetweenPasses: between two reads of one boot of slurmctld.
	LossBetweenPasses = "between_passes"
	// LossAcrossRestart: the first read of a boot against the last of
	// the boot before.
	LossAcrossRestart = "across_restart"
)

// LossKinds are the kinds of loss, in the order metrics list them.
var LossKinds = []string{LossBetweenPasses, LossAcrossRestart}

// UsageLoss is an association whose RawUsage, as slurmctld reported it,
// fell between two reads by more than decay and sshare's truncation
// explain: usage lost (sacctmgr's RawUsage=0, a restart from an older
// state), seen without the database.
type UsageLoss struct {
	AssocKey
	Kind string
	// At is the middle of the read that showed it; Before the usage the
	// read before showed, decayed to At as far as decay may have taken
	// it, and After what this read shows.
	At            time.Time
	Before, After float64
}

// Losses are the usage losses seen so far: counted per kind, the last
// ones kept.
type Losses struct {
	Counts map[string]int
	Last   []UsageLoss
}

// DriftAssociation is an association whose usage drift is beyond
// tolerance on one value, named in the metrics: Drift and Bound in
// Drift.Max's units, signed (the database's value minus slurmctld's), and
// Cause the short form of the diagnosis the comparison notes.
type DriftAssociation struct {
	AssocKey
	Kind, Value, Cause string
	Drift, Bound       float64
}

// Where the phase of the decay passes comes from.
const (
	PhaseStateFile = "state_file" // priority_last_decay_ran
	PhaseInferred  = "inferred"   // from successive reports
	// PhaseBoot: from slurmctld's boot time alone, its passes within
	// passes.BootPhase of it modulo the period (a replay, which has no
	// reads to confirm it)
	PhaseBoot    = "boot"
	PhaseUnknown = "unknown"
)

// Cluster is everything published for one cluster.
type Cluster struct {
	Name string
	// Algorithm is what slurm.conf selects; Applied what the reported
	// values show slurmctld applies ("" without a fresh report).
	Algorithm fairshare.Algorithm
	Applied   fairshare.Algorithm
	Config    Config
	Assocs    []Association
	// TRESNames name Association.TRES (cpu, mem, gres/gpu, ...), sorted.
	TRESNames []string
	// Dropped counts associations the cardinality controls left out.
	Dropped int
	// LastRollup is last_ran_table.hourly_rollup (zero before the first).
	LastRollup time.Time
	// Computed is the moment the database values are computed for.
	Computed time.Time
	// Phase is what is known of the moment of slurmctld's decay passes
	// on the usage compared (zero Source: no comparison).
	Phase Phase
	// Drift is empty when no report is fresh.
	Drift []Drift
	// Named are the associations drifting the most, at most
	// --drift.named-associations of them (nil: none, or no fresh report).
	Named []DriftAssociation
	// Losses are the usage losses what Slurm reports showed (nil: no
	// reported source, or not the cluster it reports on).
	Losses *Losses
	// Jobs are the pending jobs' priorities, one per job and partition,
	// and Pending the same summed up by account, partition and QOS; both
	// nil when not computed (clusters other than slurm.conf's).
	Jobs    []Job
	Pending []PendingGroup
	// Weights are slurm.conf's priority weights (Weights[TRES] unused).
	Weights priority.Factors
	// RecoveryComputed is when Association.Recovery was computed (zero:
	// never).
	RecoveryComputed time.Time
	// Billing checks, per partition, the billing slurmctld recorded for
	// the jobs that started since slurm.conf last changed against its
	// TRESBillingWeights (nil: not checked, clusters other than
	// slurm.conf's).
	Billing []Billing
	// Schema is the slurmdbd schema the cluster's tables were read by
	// (nil: not read from a database, as the demo's).
	Schema *Schema
}

// Schema is which of the parts of slurmdbd's schema that differ between
// Slurm releases a cluster's tables have, as the exporter found them: it
// reads each cluster by what its tables hold, so an upgrade half done or a
// schema the exporter misjudged shows here first.
type Schema struct {
	// LftRgt: assoc_table's nested set (lft, rgt), to 24.11.
	LftRgt bool
	// Lineage: assoc_table.lineage (and id_parent), 23.11+.
	Lineage bool
	// AccountFlags: acct_table.flags, 24.05+.
	AccountFlags bool
	// QOSUsage: <cluster>_qos_usage_*_table, 24.11+.
	QOSUsage bool
}

// Billing is the check of one partition's jobs: how many were checked,
// how many slurmctld billed other than slurm.conf says, and the sums of
// what it billed and of what slurm.conf gives, truncated as slurmctld
// records it.
type Billing struct {
	Partition          string
	Jobs, Mismatched   int
	Recorded, Expected float64
	// Example is the first job billed otherwise (nil: none).
	Example *BillingExample
}

// BillingExample: see Billing.Example.
type BillingExample struct {
	// Job is id_job; Recorded what slurmctld recorded, Expected what
	// slurm.conf gives before truncation.
	Job                uint32
	Recorded, Expected float64
}

// Job is one pending job's priority in one partition.
type Job struct {
	ID                            uint32
	ArrayTask                     string
	Account, User, Partition, QOS string
	// AssocID is the job's association's ID (0: not in the tree).
	AssocID uint32
	Submit  int64
	priority.Result
	// Range is, when asked for (explain), the job's factors and priority
	// at the two ends of what the unknown moment of slurmctld's last
	// priority pass allows: its fairshare factor's range and its age
	// then (nil: not asked).
	Range *JobRange
}

// JobRange: see Job.Range.
type JobRange struct {
	Low, High priority.Result
}

// PendingGroup is the pending jobs of one account, partition and QOS.
type PendingGroup struct {
	Account, Partition, QOS string
	Jobs                    int
	// Min, Median and Max are of the jobs' priorities.
	Min, Median, Max float64
	// Dominant counts the jobs by the factor that contributes most to
	// their priority.
	Dominant [priority.NumFactors]int
}

// Association is the association whose ID is id (nil: none, or id 0).
func (c *Cluster) Association(id uint32) *Association {
	for i := range c.Assocs {
		if id != 0 && c.Assocs[i].ID == id {
			return &c.Assocs[i]
		}
	}
	return nil
}

// Source is the health of one source of data: "db" or "reported".
type Source struct {
	Up          bool
	LastSuccess time.Time
}

// Stages of a refresh, as the stage label of the exporter's metrics.
const (
	StageConfig   = "config"   // reading slurm.conf
	StageConnect  = "connect"  // opening the database
	StageDB       = "db"       // reading associations and rebuilding usage
	StageExtras   = "extras"   // pending jobs and Maui windows
	StageReported = "reported" // sshare or slurmrestd
	StageBuild    = "build"    // algorithms and drift
	StagePublish  = "publish"  // rendering the exposition
	StageForecast = "forecast" // the recovery metric's inputs and forecast
)

// Stage is one step of a refresh.
type Stage struct {
	Duration time.Duration // of the last run
	Errors   uint64        // failures since start
}

// Snapshot is what a scrape serves.
type Snapshot struct {
	Clusters []Cluster
	Sources  map[string]Source
	// ClusterUp: whether each cluster of cluster_table was read at the
	// last refresh; one without tables of its own does not hold the db
	// source down.
	ClusterUp map[string]bool
	Stages    map[string]Stage
	// Published is when the snapshot was made.
	Published time.Time
}
