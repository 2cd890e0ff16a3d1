package collector

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// Namespace prefixes every metric: Slurm values computed from slurmdbd
// under slurmdbd_fairshare_, the exporter's own under slurmdbd_exporter_,
// what it found of the database itself (schema_info) under slurmdbd_.
const Namespace = "slurmdbd"

var assocLabels = []string{"slurm_cluster", "account", "user", "partition", "parent"}

// MetricInfo describes a metric for docs/metrics.md.
type MetricInfo struct {
	Name, Help string
	Labels     []string
}

// Descs and Metrics list every metric, in the same order: desc adds to
// both, so Describe and docs/metrics.md cannot miss one.
var (
	Descs   []*prometheus.Desc
	Metrics []MetricInfo
)

func desc(subsystem, name, help string, labels ...string) *prometheus.Desc {
	fq := prometheus.BuildFQName(Namespace, subsystem, name)
	d := prometheus.NewDesc(fq, help, labels, nil)
	Descs = append(Descs, d)
	Metrics = append(Metrics, MetricInfo{Name: fq, Help: help, Labels: labels})
	return d
}

func with(extra ...string) []string { return append(append([]string{}, assocLabels...), extra...) }

// Every metric the exporter exports. Association rows are nodes of the
// tree: root and account rows have an empty user.
var (
	descShares = desc("fairshare", "shares", "Raw shares of the association (assoc_table.shares; FairShare=parent is 2147483647), as of the last refresh.",
		assocLabels...)
	descNormShares = desc("fairshare", "shares_normalized", "Normalized shares as the algorithm computes them (classic: share of the cluster; fair_tree: share among siblings), as of the last refresh.",
		with("algorithm")...)
	descUsage = desc("fairshare", "usage_billing_seconds", "Decayed billing usage rebuilt from the slurmdbd rollups and job table the way slurmctld charges it (its RawUsage), as of the last refresh.",
		assocLabels...)
	descTRESUsage = desc("fairshare", "usage_tres_seconds", "Decayed usage per TRES rebuilt from slurmdbd (slurmctld's usage_tres_raw), as of the last refresh.",
		with("tres")...)
	descNormUsage = desc("fairshare", "usage_normalized", "Decayed usage over root's (NormUsage), as of the last refresh.",
		assocLabels...)
	descEffUsage = desc("fairshare", "usage_effective", "Effective usage as the algorithm computes it (EffectvUsage), as of the last refresh.",
		with("algorithm")...)
	descFactor = desc("fairshare", "factor", "Fairshare factor computed from the database: classic and fair_tree as slurmctld computes them; ticket_based (active set: associations with pending jobs) and maui (target minus windowed usage, in [-1, 1]) as what-if views. As of the last refresh.",
		with("algorithm")...)
	descLevelFS = desc("fairshare", "level_fs", "Fair Tree LevelFS (normalized shares over effective usage among siblings; +Inf at zero usage), as of the last refresh.",
		assocLabels...)
	descRank = desc("fairshare", "rank", "Fair Tree rank of a user association (FairShare = rank / user associations: the highest rank is first in Fair Tree order, 1 last), as of the last refresh.",
		assocLabels...)
	descSubtreeRankMax = desc("fairshare", "subtree_rank_max", "Fair Tree: the highest rank of the user associations under an account (its first user in Fair Tree order), on account rows, as of the last refresh.",
		assocLabels...)
	descSubtreeRankMin = desc("fairshare", "subtree_rank_min", "Fair Tree: the lowest rank of the user associations under an account (its last user in Fair Tree order), on account rows, as of the last refresh.",
		assocLabels...)
	descReportedFactor = desc("fairshare", "reported_factor", "FairShare as Slurm reports it (sshare or slurmrestd); absent when no report is fresh.",
		assocLabels...)
	descReportedUsage = desc("fairshare", "reported_usage_billing_seconds", "RawUsage as Slurm reports it (sshare or slurmrestd); absent when no report is fresh.",
		assocLabels...)
	descUncharged = desc("fairshare", "uncharged_usage_billing_seconds", "Decayed usage slurmdbd recorded that slurmctld never charged: the part of each finished job after the last decay pass, which slurmctld charges only with AccountingStorageEnforce=limits.",
		assocLabels...)
	descDriftMax = desc("fairshare", "drift_max", "Largest absolute drift over the cluster's associations. kind=formula: Slurm's values against the algorithm replayed on Slurm's own usage (should be 0). kind=usage: the database's usage against Slurm's (raw_usage relative to the larger, so at most 1) and what the difference does to the factor. Absent when no report is fresh.",
		"slurm_cluster", "kind", "value")
	descDriftBound = desc("fairshare", "drift_bound", "Largest drift the inputs' unknowns explain, per kind and value, in drift_max's units: print precision, RawUsage truncation, decay and running jobs' charge between two possible decay-pass moments, tie and rank ranges; value=fairshare at most 1, as far as two factors can be apart. Drift is flagged only beyond it, by more than the tolerance. +Inf where some value cannot be judged (usage too small against its error). Absent when no report is fresh.",
		"slurm_cluster", "kind", "value")
	descDriftAssoc = desc("fairshare", "drift_association", "Usage drift of the user associations drifting the most beyond tolerance, at most --drift.named-associations of them, and of associations on one side only (value=associations, 1), in drift_max's units and signed: the database's minus Slurm's (raw_usage relative to the larger, positive when slurmctld holds less; fairshare the factor's difference). cause: what the evidence supports (reset, restart, billing_rounding, others_usage, only_database, only_slurmctld, unexplained; docs/alerts.md#usagedrift). Absent once the association is back within tolerance, or when no report is fresh.",
		"slurm_cluster", "account", "user", "partition", "kind", "value", "cause")
	descDriftAssocBound = desc("fairshare", "drift_association_bound", "Drift the inputs' unknowns explain for each series of drift_association, in its units (unsigned): it drifts beyond this by more than the tolerance.",
		"slurm_cluster", "account", "user", "partition", "kind", "value", "cause")
	descPhase = desc("fairshare", "decay_phase_uncertainty_seconds", "How far apart slurmctld's last decay pass and the one the compared database usage was rebuilt for may be; source: state_file (priority_last_decay_ran), inferred (from successive reports), unknown (the whole PriorityCalcPeriod). Absent when no report is fresh.",
		"slurm_cluster", "source")
	descLastPass = desc("fairshare", "decay_last_pass_timestamp_seconds", "When slurmctld last ran its decay pass before the compared report (unix seconds), as far as known; source as for decay_phase_uncertainty_seconds. Absent when the phase is unknown or no report is fresh.",
		"slurm_cluster", "source")
	descBeyond = desc("fairshare", "drift_beyond_tolerance_associations", "Associations whose drift exceeds the exporter's tolerance, per kind and value (value=associations: present on one side only). Absent when no report is fresh.",
		"slurm_cluster", "kind", "value")
	descConfig = desc("fairshare", "config_info", "Priority settings of slurm.conf as the exporter read them; value 1.",
		"slurm_cluster", "algorithm", "priority_flags", "half_life_seconds", "calc_period_seconds", "dampening_factor", "reset_period")
	descSchema = desc("", "schema_info", "Which of the parts of slurmdbd's schema that differ between Slurm releases the cluster's tables have, as the exporter read them (again at the refresh after slurmdbd's start changed a table, every few minutes, and after a failed refresh): lft_rgt (assoc_table's nested set, to 24.11), lineage (assoc_table.lineage, 23.11+), account_flags (acct_table.flags, 24.05+), qos_usage (<cluster>_qos_usage_*_table, 24.11+); value 1, as of the last refresh. Absent where not read from a database (the demo).",
		"slurm_cluster", "lft_rgt", "lineage", "account_flags", "qos_usage")
	descAlgorithm = desc("fairshare", "algorithm_mismatch", "1 when the algorithm slurmctld applies, inferred from the reported values (a LevelFS column, shares normalized among siblings or globally), differs from slurm.conf's; absent when no report is fresh.",
		"slurm_cluster", "configured", "applied")
	descRecovery = desc("fairshare", "recovery_seconds", "Seconds from fairshare_recovery_computed_timestamp_seconds until the user association's factor reaches its fair level (threshold=fair_level) if it submits nothing new, the others keep their rate of the last --forecast.window of rollups and running jobs run to their time limit (docs/forecast.md): 0 when at or above it, +Inf beyond 30 days; as of its last computation.",
		with("threshold")...)
	descRecoveryComputed = desc("fairshare", "recovery_computed_timestamp_seconds", "When fairshare_recovery_seconds was last computed (unix seconds; every --forecast.interval): the values are as of then.",
		"slurm_cluster")
	descLosses = desc("fairshare", "usage_losses_total", "User associations whose RawUsage, as Slurm reports it, fell between two reads by more than decay and sshare's truncation explain, since the exporter started: usage lost in slurmctld (sacctmgr RawUsage=0, or state restored from an older checkpoint), seen without the database. kind: between_passes (two reads of one boot of slurmctld) or across_restart (the first read of a boot against the last of the one before).",
		"slurm_cluster", "kind")
	descLastLoss = desc("fairshare", "usage_loss_timestamp_seconds", "When a user association's usage loss (usage_losses_total) was read (unix seconds), for the last 20 losses.",
		"slurm_cluster", "account", "user", "partition", "kind")
	descBillingJobs = desc("fairshare", "billing_checked_jobs", "Jobs that started since slurm.conf last changed and ran after the last hourly rollup whose billing slurmctld recorded, checked against slurm.conf's TRESBillingWeights and PriorityFlags, as of the last refresh (slurm.conf's cluster only).",
		"slurm_cluster", "partition")
	descBillingMismatched = desc("fairshare", "billing_mismatched_jobs", "Of billing_checked_jobs, those slurmctld billed other than slurm.conf's TRESBillingWeights and PriorityFlags give (beyond its truncation to an integer): slurmctld runs with other billing weights, and charges fairshare usage by them.",
		"slurm_cluster", "partition")
	descBillingRatio = desc("fairshare", "billing_ratio", "Billing slurmctld recorded over what slurm.conf's weights give (truncated as slurmctld records it), summed over billing_checked_jobs: 1 when they agree.",
		"slurm_cluster", "partition")
	descRollupLag = desc("fairshare", "rollup_lag_seconds", "Seconds from the last hourly rollup (last_ran_table) to the moment the values are computed for; NaN, which never alarms, before a cluster's first rollup.",
		"slurm_cluster")
	descComputed = desc("fairshare", "computed_timestamp_seconds", "The moment the cluster's database values are computed for (unix seconds).",
		"slurm_cluster")
	descDropped = desc("fairshare", "associations_dropped", "Associations left out by the cardinality controls (--collector.* flags).",
		"slurm_cluster")
	descPendingJobs = desc("priority", "pending_jobs", "Pending jobs (one per partition a job was submitted to) whose priority the exporter computes, as sprio lists them (eligible, not held), as of the last refresh.",
		"slurm_cluster", "account", "partition", "qos")
	descPrioMin = desc("priority", "pending_job_priority_min", "Lowest multifactor priority of the pending jobs, computed from the database and slurm.conf as slurmctld does, as of the last refresh.",
		"slurm_cluster", "account", "partition", "qos")
	descPrioMedian = desc("priority", "pending_job_priority_median", "Median multifactor priority of the pending jobs, as of the last refresh.",
		"slurm_cluster", "account", "partition", "qos")
	descPrioMax = desc("priority", "pending_job_priority_max", "Highest multifactor priority of the pending jobs, as of the last refresh.",
		"slurm_cluster", "account", "partition", "qos")
	descDominant = desc("priority", "pending_jobs_dominant_factor", "Pending jobs by the factor (age, assoc, fairshare, jobsize, partition, qos, tres) that contributes most to their priority; factors dominating no job are left out.",
		"slurm_cluster", "account", "partition", "qos", "factor")
	descWeight = desc("priority", "weight", "slurm.conf's PriorityWeight* of each factor (tres: the sum of PriorityWeightTRES).",
		"slurm_cluster", "factor")
	descUp = desc("exporter", "up", "Whether the last attempt to read the source succeeded and its data is fresh (1) or not (0). source: db or reported.",
		"source")
	descClusterUp = desc("exporter", "cluster_up", "Whether the cluster of cluster_table was read from the database at the last refresh (1) or not (0); a cluster without tables of its own is 0 and does not make up{source=\"db\"} 0.",
		"slurm_cluster")
	descLastSuccess = desc("exporter", "last_success_timestamp_seconds", "When the source was last read successfully (unix seconds); frozen while it fails.",
		"source")
	descSourceAge = desc("exporter", "source_age_seconds", "Seconds since the source was last read successfully, at scrape time; +Inf before the first success.",
		"source")
	descStageDuration = desc("exporter", "stage_duration_seconds", "How long the last run of a refresh stage took.",
		"stage")
	descStageErrors = desc("exporter", "stage_errors_total", "Failed runs of a refresh stage since the exporter started.",
		"stage")
	descAge = desc("exporter", "snapshot_age_seconds", "Seconds since the served snapshot was published, at scrape time.")
)

// Collector serves the last published snapshot.
type Collector struct {
	// Extended adds the per-association series left out by default (see
	// collectClusterAssocs); set it before the first Publish.
	Extended bool
	// Filter is the series budget (the --collector.* flags), applied to
	// every snapshot published; set it before the first Publish.
	Filter Filter

	snap atomic.Pointer[result.Snapshot]
	enc  atomic.Pointer[encoded]
	own  own
	now  func() time.Time
}

// New returns a collector with nothing published yet.
func New() *Collector { return &Collector{now: time.Now} }

// Current is the published snapshot (nil before the first).
func (c *Collector) Current() *result.Snapshot { return c.snap.Load() }

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range Descs {
		ch <- d
	}
}

// Collect sends the published snapshot through client_golang: for tests
// and linting. /metrics serves the same samples rendered by Publish.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap.Load()
	if s == nil {
		return
	}
	collectAssociations(s, c.Extended, toChan(ch))
	collectStatic(s, toChan(ch))
	collectLive(s, c.now(), toChan(ch))
}

// sink receives every sample; label values in the descriptor's order.
type sink func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string)

func toChan(ch chan<- prometheus.Metric) sink {
	return func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, validUTF8(labels)...)
	}
}

type gaugeFunc func(d *prometheus.Desc, v float64, labels ...string)

func (s sink) gauges() gaugeFunc {
	return func(d *prometheus.Desc, v float64, labels ...string) { s(d, prometheus.GaugeValue, v, labels...) }
}

// validUTF8 replaces bytes that are not UTF-8 in label values: names come
// from database rows and sshare output, and client_golang refuses (Must*:
// panics on) a label value that is not UTF-8. The text format escapes the
// rest (quotes, backslashes, newlines).
func validUTF8(labels []string) []string {
	for i, l := range labels {
		if !utf8.ValidString(l) {
			labels[i] = strings.ToValidUTF8(l, "\uFFFD")
		}
	}
	return labels
}

// collectAssociations sends the per-association series: nearly all of
// them, and unchanged between decay passes.
func collectAssociations(s *result.Snapshot, extended bool, out sink) {
	gauge := out.gauges()
	for i := range s.Clusters {
		collectClusterAssocs(&s.Clusters[i], extended, gauge)
	}
}

// collectStatic sends the rest of what depends on the snapshot only.
func collectStatic(s *result.Snapshot, out sink) {
	gauge := out.gauges()
	for i := range s.Clusters {
		collectCluster(&s.Clusters[i], out)
	}
	// in order: the exposition is rendered once a refresh, and the same
	// state gives the same bytes
	for _, name := range slices.Sorted(maps.Keys(s.Sources)) {
		src := s.Sources[name]
		gauge(descUp, b2f(src.Up), name)
		if !src.LastSuccess.IsZero() {
			gauge(descLastSuccess, fairshare.Seconds(src.LastSuccess), name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.ClusterUp)) {
		gauge(descClusterUp, b2f(s.ClusterUp[name]), name)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Stages)) {
		st := s.Stages[name]
		gauge(descStageDuration, st.Duration.Seconds(), name)
		out(descStageErrors, prometheus.CounterValue, float64(st.Errors), name)
	}
}

// collectLive sends what changes with the time of the scrape.
func collectLive(s *result.Snapshot, now time.Time, out sink) {
	gauge := out.gauges()
	for name, src := range s.Sources {
		age := math.Inf(1)
		if !src.LastSuccess.IsZero() {
			age = now.Sub(src.LastSuccess).Seconds()
		}
		gauge(descSourceAge, age, name)
	}
	gauge(descAge, now.Sub(s.Published).Seconds())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectClusterAssocs sends a cluster's association series. By default
// an association gets at most eight: shares, usage, and what the
// configured algorithm makes of them (normalized shares, factor, and
// classic's effective usage or Fair Tree's level_fs and rank; an account
// row, which has no factor or rank, the block of ranks of the users under
// it instead), and Slurm's reported factor and usage: some 800k series at
// 100k associations. extended adds per-TRES usage, normalized usage,
// uncharged usage, the other algorithm's values and the what-if factors
// (ticket_based, maui): 17 and more per association.
func collectClusterAssocs(cl *result.Cluster, extended bool, gauge gaugeFunc) {
	fairTree := cl.Algorithm == fairshare.AlgorithmFairTree
	var rankLo, rankHi []int32
	if fairTree || extended {
		rankLo, rankHi = subtreeRanks(cl.Assocs)
	}
	// one label buffer for every sample: the sinks keep no label slice,
	// and a slice per sample would be most of a publish's garbage
	lb := make([]string, len(assocLabels)+1)
	l := lb[:len(assocLabels)]
	with := func(extra string) []string { lb[len(l)] = extra; return lb }
	set := func(d *prometheus.Desc, v float64, extra ...string) {
		if !math.IsNaN(v) {
			if len(extra) > 0 {
				gauge(d, v, with(extra[0])...)
			} else {
				gauge(d, v, l...)
			}
		}
	}
	for i := range cl.Assocs {
		a := &cl.Assocs[i]
		l[0], l[1], l[2], l[3], l[4] = cl.Name, a.Account, a.User, a.Partition, a.Parent
		gauge(descShares, float64(a.Shares), l...)
		gauge(descUsage, a.RawUsage, l...)
		for _, alg := range []struct {
			name fairshare.Algorithm
			v    *fairshare.Values
		}{{fairshare.AlgorithmClassic, &a.Classic}, {fairshare.AlgorithmFairTree, &a.FairTree}} {
			if alg.name != cl.Algorithm && !extended {
				continue
			}
			set(descNormShares, alg.v.NormShares, string(alg.name))
			set(descFactor, alg.v.FairShare, string(alg.name))
			if alg.name == fairshare.AlgorithmClassic || extended {
				set(descEffUsage, alg.v.EffectiveUsage, string(alg.name))
			}
		}
		if fairTree || extended {
			set(descLevelFS, a.FairTree.LevelFS)
			if a.FairTree.Rank > 0 {
				set(descRank, float64(a.FairTree.Rank))
			}
			if a.User == "" && rankHi[i] > 0 {
				set(descSubtreeRankMax, float64(rankHi[i]))
				set(descSubtreeRankMin, float64(rankLo[i]))
			}
		}
		set(descReportedFactor, a.ReportedFactor)
		set(descReportedUsage, a.ReportedUsage)
		set(descRecovery, a.Recovery, "fair_level")
		if !extended {
			continue
		}
		for k, v := range a.TRES {
			gauge(descTRESUsage, v, with(cl.TRESNames[k])...)
		}
		set(descNormUsage, a.Classic.NormUsage)
		set(descFactor, a.TicketBased, "ticket_based")
		set(descFactor, a.Maui, "maui")
		set(descUncharged, a.Uncharged)
	}
}

// subtreeRanks gives each account row of as the lowest and highest Fair
// Tree rank of the user associations under it (0 where it has none), from
// the associations given: Fair Tree ranks the users of a subtree one after
// another, so an account's users hold one block of ranks, and where that
// block lies is what the account's LevelFS among its siblings decided.
func subtreeRanks(as []result.Association) (lo, hi []int32) {
	lo, hi = make([]int32, len(as)), make([]int32, len(as))
	account := make(map[string]int32)
	for i := range as {
		if as[i].User == "" {
			account[as[i].Account] = int32(i)
		}
	}
	// up is each account row's parent row (-1: root, or its parent left
	// out by the cardinality controls)
	up := make([]int32, len(as))
	for i := range as {
		up[i] = -1
		if p, ok := account[as[i].Parent]; ok && as[i].User == "" && as[i].Parent != "" {
			up[i] = p
		}
	}
	for i := range as {
		r := as[i].FairTree.Rank
		if as[i].User == "" || r <= 0 {
			continue
		}
		p, ok := account[as[i].Parent]
		if !ok {
			continue
		}
		// bounded: account names are unique, so the parent links make a
		// tree, but a loop in bad data must not hang a publish
		for steps := 0; p >= 0 && steps < len(as); steps++ {
			if hi[p] == 0 || r > hi[p] {
				hi[p] = r
			}
			if lo[p] == 0 || r < lo[p] {
				lo[p] = r
			}
			p = up[p]
		}
	}
	return lo, hi
}

// collectCluster sends a cluster's own series: losses, drift, settings,
// times.
func collectCluster(cl *result.Cluster, out sink) {
	gauge := out.gauges()
	if l := cl.Losses; l != nil {
		for _, k := range result.LossKinds {
			out(descLosses, prometheus.CounterValue, float64(l.Counts[k]), cl.Name, k)
		}
		for _, x := range l.Last {
			gauge(descLastLoss, fairshare.Seconds(x.At), cl.Name, x.Account, x.User, x.Partition, x.Kind)
		}
	}
	for _, b := range cl.Billing {
		gauge(descBillingJobs, float64(b.Jobs), cl.Name, b.Partition)
		gauge(descBillingMismatched, float64(b.Mismatched), cl.Name, b.Partition)
		if b.Expected > 0 {
			gauge(descBillingRatio, b.Recorded/b.Expected, cl.Name, b.Partition)
		}
	}
	for _, d := range cl.Drift {
		gauge(descDriftMax, d.Max, cl.Name, d.Kind, d.Value)
		gauge(descBeyond, float64(d.Beyond), cl.Name, d.Kind, d.Value)
		gauge(descDriftBound, d.Bound, cl.Name, d.Kind, d.Value)
	}
	for _, n := range cl.Named {
		l := []string{cl.Name, n.Account, n.User, n.Partition, n.Kind, n.Value, n.Cause}
		gauge(descDriftAssoc, n.Drift, l...)
		gauge(descDriftAssocBound, n.Bound, l...)
	}
	if cl.Phase.Source != "" {
		gauge(descPhase, cl.Phase.Uncertainty.Seconds(), cl.Name, cl.Phase.Source)
		if !cl.Phase.Last.IsZero() {
			gauge(descLastPass, fairshare.Seconds(cl.Phase.Last), cl.Name, cl.Phase.Source)
		}
	}
	c := cl.Config
	gauge(descConfig, 1, cl.Name, string(cl.Algorithm), c.PriorityFlags, ftoa(c.HalfLife.Seconds()), ftoa(c.CalcPeriod.Seconds()),
		strconv.Itoa(int(c.Dampening)), c.ResetPeriod)
	if sc := cl.Schema; sc != nil {
		gauge(descSchema, 1, cl.Name, strconv.FormatBool(sc.LftRgt), strconv.FormatBool(sc.Lineage), strconv.FormatBool(sc.AccountFlags), strconv.FormatBool(sc.QOSUsage))
	}
	if cl.Applied != "" {
		gauge(descAlgorithm, b2f(cl.Applied != cl.Algorithm), cl.Name, string(cl.Algorithm), string(cl.Applied))
	}
	lag := math.NaN()
	if !cl.LastRollup.IsZero() {
		lag = cl.Computed.Sub(cl.LastRollup).Seconds()
	}
	gauge(descRollupLag, lag, cl.Name)
	gauge(descComputed, fairshare.Seconds(cl.Computed), cl.Name)
	if !cl.RecoveryComputed.IsZero() {
		gauge(descRecoveryComputed, fairshare.Seconds(cl.RecoveryComputed), cl.Name)
	}
	gauge(descDropped, float64(cl.Dropped), cl.Name)
	if cl.Pending == nil {
		return
	}
	for f, w := range cl.Weights {
		gauge(descWeight, w, cl.Name, priority.Factor(f).String())
	}
	for i := range cl.Pending {
		g := &cl.Pending[i]
		l := []string{cl.Name, g.Account, g.Partition, g.QOS}
		gauge(descPendingJobs, float64(g.Jobs), l...)
		gauge(descPrioMin, g.Min, l...)
		gauge(descPrioMedian, g.Median, l...)
		gauge(descPrioMax, g.Max, l...)
		for f, n := range g.Dominant {
			if n > 0 {
				gauge(descDominant, float64(n), append(l, priority.Factor(f).String())...)
			}
		}
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
