package collector

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Namespace prefixes every metric: Slurm values computed from slurmdbd
// under slurmdbd_fairshare_, the exporter's own under slurmdbd_exporter_.
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
	descFactor = desc("fairshare", "factor", "Fairshare factor computed from the database: classic and fair_tree as slurmctld computes them, ticket_based and maui as what-if views, as of the last refresh.",
		with("algorithm")...)
	descLevelFS = desc("fairshare", "level_fs", "Fair Tree LevelFS (normalized shares over effective usage among siblings; +Inf at zero usage), as of the last refresh.",
		assocLabels...)
	descRank = desc("fairshare", "rank", "Fair Tree rank of a user association (FairShare = rank / user associations), as of the last refresh.",
		assocLabels...)
	descReportedFactor = desc("fairshare", "reported_factor", "FairShare as Slurm reports it (sshare), as of the last report.",
		assocLabels...)
	descReportedUsage = desc("fairshare", "reported_usage_billing_seconds", "RawUsage as Slurm reports it (sshare), as of the last report.",
		assocLabels...)
	descDriftMax = desc("fairshare", "drift_max", "Largest absolute difference between computed and reported values per kind of value, over the cluster's associations.",
		"slurm_cluster", "value")
	descBeyond = desc("fairshare", "drift_beyond_tolerance_associations", "Associations whose computed and reported values differ by more than allowed, per kind of value.",
		"slurm_cluster", "value")
	descConfig = desc("fairshare", "config_info", "Priority settings of slurm.conf as the exporter read them; value 1.",
		"slurm_cluster", "algorithm", "priority_flags", "half_life_seconds", "calc_period_seconds", "dampening_factor", "reset_period")
	descRollupLag = desc("fairshare", "rollup_lag_seconds", "Seconds from the last hourly rollup (last_ran_table) to the refresh; NaN before a cluster's first rollup.",
		"slurm_cluster")
	descUp = desc("exporter", "up", "Whether the last attempt to read the source succeeded (1) or not (0).",
		"source")
	descLastSuccess = desc("exporter", "last_success_timestamp_seconds", "When the source was last read successfully (unix seconds); frozen while it fails.",
		"source")
	descDuration = desc("exporter", "refresh_duration_seconds", "How long the last read of the source took.",
		"source")
	descErrors = desc("exporter", "errors_total", "Failed reads of the source since the exporter started.",
		"source")
	descAge = desc("exporter", "snapshot_age_seconds", "Seconds since the served values were computed.")
)

// Collector serves the last published snapshot.
type Collector struct {
	snap atomic.Pointer[Snapshot]
	now  func() time.Time
}

// New returns a collector with nothing published yet.
func New() *Collector { return &Collector{now: time.Now} }

// Publish makes s what scrapes serve. s must not change afterwards.
func (c *Collector) Publish(s *Snapshot) { c.snap.Store(s) }

// Current is the published snapshot (nil before the first).
func (c *Collector) Current() *Snapshot { return c.snap.Load() }

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range Descs {
		ch <- d
	}
}

// Collect sends the published snapshot as constant metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap.Load()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i := range s.Clusters {
		cl := &s.Clusters[i]
		collectCluster(cl, s.Refreshed, gauge)
	}
	for name, src := range s.Sources {
		gauge(descUp, b2f(src.Up), name)
		if !src.LastSuccess.IsZero() {
			gauge(descLastSuccess, float64(src.LastSuccess.UnixNano())/1e9, name)
		}
		gauge(descDuration, src.Duration.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(src.Errors), name)
	}
	gauge(descAge, c.now().Sub(s.Refreshed).Seconds())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func collectCluster(cl *Cluster, refreshed time.Time, gauge func(*prometheus.Desc, float64, ...string)) {
	for i := range cl.Assocs {
		a := &cl.Assocs[i]
		l := []string{cl.Name, a.Account, a.User, a.Partition, a.Parent}
		gauge(descShares, float64(a.Shares), l...)
		gauge(descUsage, a.RawUsage, l...)
		for tres, v := range a.TRESUsage {
			gauge(descTRESUsage, v, append(l, tres)...)
		}
		set := func(d *prometheus.Desc, v float64, extra ...string) {
			if !math.IsNaN(v) {
				gauge(d, v, append(l, extra...)...)
			}
		}
		set(descNormUsage, a.Classic.NormUsage)
		for _, alg := range []struct {
			name string
			v    *fairshare.Values
		}{{string(fairshare.AlgorithmClassic), &a.Classic}, {string(fairshare.AlgorithmFairTree), &a.FairTree}} {
			set(descNormShares, alg.v.NormShares, alg.name)
			set(descEffUsage, alg.v.EffectiveUsage, alg.name)
			set(descFactor, alg.v.FairShare, alg.name)
		}
		set(descFactor, a.TicketBased, "ticket_based")
		set(descFactor, a.Maui, "maui")
		set(descLevelFS, a.FairTree.LevelFS)
		if a.FairTree.Rank > 0 {
			gauge(descRank, float64(a.FairTree.Rank), l...)
		}
		set(descReportedFactor, a.ReportedFactor)
		set(descReportedUsage, a.ReportedUsage)
	}
	if cl.Drift != nil {
		m := cl.Drift.Summary.MaxDrift
		for k, v := range []drift.Num{m.NormShares, m.RawUsage, m.NormUsage, m.EffectiveUsage, m.FairShare, m.LevelFS} {
			gauge(descDriftMax, math.Abs(float64(v)), cl.Name, drift.Fields[k])
			gauge(descBeyond, float64(cl.Drift.Summary.Beyond[drift.Fields[k]]), cl.Name, drift.Fields[k])
		}
	}
	c := cl.Config
	gauge(descConfig, 1, cl.Name, string(cl.Algorithm), c.PriorityFlags, ftoa(c.HalfLife.Seconds()), ftoa(c.CalcPeriod.Seconds()),
		strconv.Itoa(int(c.Dampening)), c.ResetPeriod)
	lag := math.NaN()
	if !cl.LastRollup.IsZero() {
		lag = refreshed.Sub(cl.LastRollup).Seconds()
	}
	gauge(descRollupLag, lag, cl.Name)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
