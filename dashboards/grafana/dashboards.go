// Package grafana builds the bundled Grafana dashboards as code, with
// grafana-foundation-sdk; `make dashboards` writes them to *.json, and a
// test fails when the committed JSON is stale. It is a module of its own,
// so that the SDK and the PromQL parser its tests use stay out of the
// exporter's build.
package grafana

//lint:file-ignore SA1019 dashboard (schema v1) is what Grafana 9 to 12 provisioning loads; dashboardv2 is Grafana 12's experimental schema

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Units of the panels (Grafana's unit ids).
const (
	unitRatio   = "percentunit" // factors, normalized shares and usage: 0..1
	unitSeconds = "s"
	unitCount   = "short"
	unitBool    = "bool_yes_no"
	unitPlain   = "none" // ranks, LevelFS
)

// sel is the selector every association query carries.
const sel = `slurm_cluster="$slurm_cluster"`

var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr, legend} }

func targets(qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, x := range qs {
		out[i] = prometheus.NewDataqueryBuilder().Expr(x.expr).LegendFormat(x.legend).RefId(string(rune('A' + i))).Datasource(ds)
	}
	return out
}

func series(title, unit, desc string, qs ...query) cog.Builder[dashboard.Panel] {
	return timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Targets(targets(qs)).Height(8).Span(12)
}

func single(title, unit, desc string, qs ...query) cog.Builder[dashboard.Panel] {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Targets(targets(qs)).Height(4).Span(6)
}

// instant is a table of one instant query, a row per series.
func instant(title, unit, desc, expr string) cog.Builder[dashboard.Panel] {
	t := prometheus.NewDataqueryBuilder().Expr(expr).Instant().Format(prometheus.PromQueryFormatTable).RefId("A").Datasource(ds)
	return table.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).WithTarget(t).Height(10).Span(12)
}

func datasourceVar() cog.Builder[dashboard.VariableModel] {
	return dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")
}

// labelVar is a variable of the values of label on metric, narrowed by
// filter.
func labelVar(name, label, metric, filter string, all bool) cog.Builder[dashboard.VariableModel] {
	def := "label_values(" + metric + "{" + filter + "}, " + label + ")"
	v := dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(ds).
		Query(dashboard.StringOrMap{String: cog.ToPtr(def)}).Definition(def).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
	if all {
		v = v.IncludeAll(true).AllValue(".*")
	}
	return v
}

func clusterVar() cog.Builder[dashboard.VariableModel] {
	return labelVar("slurm_cluster", "slurm_cluster", "slurmdbd_fairshare_config_info", "", false)
}

func board(uid, title string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Tags([]string{"slurm", "fairshare", "slurmdbd_exporter"}).
		Refresh("1m").Time("now-7d", "now").Timezone(common.TimeZoneBrowser).Editable().WithVariable(datasourceVar())
}

// All are the bundled dashboards by file name.
func All() map[string]*dashboard.DashboardBuilder {
	return map[string]*dashboard.DashboardBuilder{
		"fairshare-overview.json":  overview(),
		"fairshare-drilldown.json": drilldown(),
		"fairshare-drift.json":     drift(),
		"exporter-health.json":     health(),
	}
}

func overview() *dashboard.DashboardBuilder {
	users := sel + `, user!=""`
	return board("slurm-fairshare-overview", "Slurm fairshare: overview").
		Description("Fairshare of a cluster as recomputed from the slurmdbd database: who uses what, how factors are spread, shares against usage, Fair Tree ranks.").
		WithVariable(clusterVar()).
		WithVariable(labelVar("algorithm", "algorithm", "slurmdbd_fairshare_config_info", sel, false)).
		WithRow(dashboard.NewRowBuilder("Cluster")).
		WithPanel(single("User associations", unitCount, "User associations exported.", q(`count(slurmdbd_fairshare_shares{`+users+`})`, ""))).
		WithPanel(single("Accounts", unitCount, "Account associations exported, root included.", q(`count(slurmdbd_fairshare_shares{`+sel+`, user=""})`, ""))).
		WithPanel(single("Median user factor", unitRatio, "Median fairshare factor of the user associations under the configured algorithm.", q(`slurm_cluster_algorithm:slurmdbd_fairshare_factor:quantile{`+sel+`, algorithm="$algorithm", quantile="0.5"}`, ""))).
		WithPanel(single("Hourly rollup lag", unitSeconds, "Time since slurmdbd's last hourly rollup.", q(`slurmdbd_fairshare_rollup_lag_seconds{`+sel+`}`, ""))).
		WithRow(dashboard.NewRowBuilder("Consumers")).
		WithPanel(series("Top accounts by decayed usage", unitRatio, "Share of the cluster's decayed usage of the ten accounts whose own users used most (recorded: slurm_cluster_account:slurmdbd_fairshare_usage_billing_seconds:ratio).",
			q(`topk(10, slurm_cluster_account:slurmdbd_fairshare_usage_billing_seconds:ratio{`+sel+`})`, "{{account}}"))).
		WithPanel(series("Top users by decayed usage", unitRatio, "Share of the cluster's decayed usage of the ten largest user associations.",
			q(`topk(10, slurmdbd_fairshare_usage_normalized{`+users+`})`, "{{user}} ({{account}})"))).
		WithRow(dashboard.NewRowBuilder("Fairshare")).
		WithPanel(series("Factor distribution", unitRatio, "Quantiles of the user associations' fairshare factor under the configured algorithm.",
			q(`slurm_cluster_algorithm:slurmdbd_fairshare_factor:quantile{`+sel+`, algorithm="$algorithm"}`, "q{{quantile}}"))).
		WithPanel(series("Shares against effective usage (accounts under root)", unitRatio, "Normalized shares (what an account is promised) and effective usage (what it used) of root's children; usage above shares lowers the factor.",
			q(`slurmdbd_fairshare_shares_normalized{`+sel+`, algorithm="$algorithm", user="", parent="root"}`, "shares {{account}}"),
			q(`slurmdbd_fairshare_usage_effective{`+sel+`, algorithm="$algorithm", user="", parent="root"}`, "usage {{account}}"))).
		WithPanel(instant("Lowest Fair Tree ranks", unitPlain, "User associations last in Fair Tree order (rank: 1 is first; factor = rank / users).",
			`bottomk(20, slurmdbd_fairshare_rank{`+sel+`})`)).
		WithRow(dashboard.NewRowBuilder("Pending jobs")).
		WithPanel(series("Pending jobs by account", unitCount, "Eligible, not held pending jobs (one per partition a job asks for), as sprio lists them.",
			q(`sum by (account) (slurmdbd_priority_pending_jobs{`+sel+`})`, "{{account}}"))).
		WithPanel(series("Median priority by account", unitPlain, "Median multifactor priority of each account's pending jobs, recomputed from the database and slurm.conf (explain --job gives one job's factors).",
			q(`max by (account) (slurmdbd_priority_pending_job_priority_median{`+sel+`})`, "{{account}}"))).
		WithPanel(series("What sets pending jobs' priority", unitCount, "Pending jobs by the factor that contributes most to their priority: with fairshare on top, usage decides; with age, waiting time.",
			q(`sum by (factor) (slurmdbd_priority_pending_jobs_dominant_factor{`+sel+`})`, "{{factor}}")))
}

func drilldown() *dashboard.DashboardBuilder {
	one := sel + `, account=~"$account", user=~"$user"`
	return board("slurm-fairshare-drilldown", "Slurm fairshare: account and user").
		Description("Why is a priority low? Shares against usage over time, LevelFS among siblings, per-TRES usage, for one account or user (explain --user gives the same path on the command line).").
		WithVariable(clusterVar()).
		WithVariable(labelVar("account", "account", "slurmdbd_fairshare_shares", sel, false)).
		WithVariable(labelVar("user", "user", "slurmdbd_fairshare_shares", sel+`, account=~"$account"`, true)).
		WithRow(dashboard.NewRowBuilder("Factor")).
		WithPanel(series("Fairshare factor", unitRatio, "The factor under each algorithm: classic and fair_tree as slurmctld computes them, ticket_based and maui as what-if views.",
			q(`slurmdbd_fairshare_factor{`+one+`}`, "{{algorithm}} {{user}}"))).
		WithPanel(series("Normalized shares against effective usage", unitRatio, "What the association is promised and what it used; usage above shares lowers the factor.",
			q(`slurmdbd_fairshare_shares_normalized{`+one+`}`, "shares {{algorithm}} {{user}}"),
			q(`slurmdbd_fairshare_usage_effective{`+one+`}`, "usage {{algorithm}} {{user}}"))).
		WithRow(dashboard.NewRowBuilder("Fair Tree")).
		WithPanel(instant("LevelFS of the account's children", unitPlain, "LevelFS (normalized shares over effective usage among siblings) of the account's users and sub-accounts: Fair Tree visits siblings highest first; +Inf is no usage.",
			`sort_desc(slurmdbd_fairshare_level_fs{`+sel+`, parent=~"$account"})`)).
		WithPanel(series("Rank", unitPlain, "Fair Tree rank of the user associations (1 is first).",
			q(`slurmdbd_fairshare_rank{`+one+`}`, "{{user}}"))).
		WithRow(dashboard.NewRowBuilder("Usage")).
		WithPanel(series("Decayed usage per TRES", unitSeconds, "Decayed usage of each TRES (TRES-seconds; memory in MB-seconds).",
			q(`slurmdbd_fairshare_usage_tres_seconds{`+one+`}`, "{{tres}} {{user}}"))).
		WithPanel(series("Decayed billing usage", unitSeconds, "RawUsage: decayed billing TRES-seconds, from the database and as Slurm reports it.",
			q(`slurmdbd_fairshare_usage_billing_seconds{`+one+`}`, "database {{user}}"),
			q(`slurmdbd_fairshare_reported_usage_billing_seconds{`+one+`}`, "Slurm {{user}}")))
}

func drift() *dashboard.DashboardBuilder {
	return board("slurm-fairshare-drift", "Slurm fairshare: drift").
		Description("What Slurm reports against what the exporter computes. Formula drift: slurmctld computing with rules other than slurm.conf's. Usage drift: the database's usage against slurmctld's (lost state, a reset).").
		WithVariable(clusterVar()).
		WithVariable(labelVar("account", "account", "slurmdbd_fairshare_shares", sel, true)).
		WithRow(dashboard.NewRowBuilder("Now")).
		WithPanel(single("Beyond tolerance: formula", unitCount, "Associations whose formula drift exceeds the tolerance (the most over the drifting values).", q(`slurm_cluster_kind:slurmdbd_fairshare_drift_beyond_tolerance_associations:max{`+sel+`, kind="formula"}`, ""))).
		WithPanel(single("Beyond tolerance: usage", unitCount, "Associations whose usage drift exceeds the tolerance (the most over the drifting values).", q(`slurm_cluster_kind:slurmdbd_fairshare_drift_beyond_tolerance_associations:max{`+sel+`, kind="usage"}`, ""))).
		WithPanel(single("Algorithm mismatch", unitBool, "slurmctld applies another algorithm than slurm.conf's (a PriorityFlags change not yet applied by a restart).", q(`max(slurmdbd_fairshare_algorithm_mismatch{`+sel+`})`, ""))).
		WithPanel(single("Reported source up", unitBool, "Whether what Slurm reports was read and is fresh; drift is withdrawn while it is not.", q(`max(slurmdbd_exporter_up{source="reported"})`, ""))).
		WithRow(dashboard.NewRowBuilder("Over time")).
		WithPanel(series("Largest drift", unitPlain, "Largest absolute drift over the cluster's associations, per kind and value.",
			q(`slurmdbd_fairshare_drift_max{`+sel+`}`, "{{kind}} {{value}}"))).
		WithPanel(series("Associations beyond tolerance", unitCount, "Per kind and value (value=associations: present on one side only).",
			q(`slurmdbd_fairshare_drift_beyond_tolerance_associations{`+sel+`}`, "{{kind}} {{value}}"))).
		WithRow(dashboard.NewRowBuilder("Computed against reported")).
		WithPanel(series("Fairshare factor: computed and reported", unitRatio, "The configured algorithm's factor from the database and Slurm's, for the selected accounts' associations.",
			q(`slurmdbd_fairshare_factor{`+sel+`, account=~"$account"} * on(slurm_cluster, algorithm) group_left() slurmdbd_fairshare_config_info{`+sel+`}`, "computed {{account}} {{user}}"),
			q(`slurmdbd_fairshare_reported_factor{`+sel+`, account=~"$account"}`, "reported {{account}} {{user}}"))).
		WithPanel(instant("Largest usage differences", unitSeconds, "Database usage minus Slurm's, largest first: a negative value is usage Slurm has and the database does not.",
			`topk(20, abs(slurmdbd_fairshare_usage_billing_seconds{`+sel+`} - on(slurm_cluster, account, user, partition) slurmdbd_fairshare_reported_usage_billing_seconds{`+sel+`}))`))
}

func health() *dashboard.DashboardBuilder {
	return board("slurmdbd-exporter-health", "slurmdbd_exporter: health").
		Description("The exporter and its sources: up, age, refresh stages, rollups.").
		WithVariable(clusterVar()).
		WithRow(dashboard.NewRowBuilder("Sources")).
		WithPanel(series("Sources up", unitBool, "1: the last read of the source succeeded and is fresh.", q(`slurmdbd_exporter_up`, "{{source}}"))).
		WithPanel(series("Source age", unitSeconds, "Time since each source was last read successfully.", q(`slurmdbd_exporter_source_age_seconds`, "{{source}}"))).
		WithRow(dashboard.NewRowBuilder("Refresh")).
		WithPanel(series("Stage duration", unitSeconds, "How long the last run of each refresh stage took.", q(`slurmdbd_exporter_stage_duration_seconds`, "{{stage}}"))).
		WithPanel(series("Stage errors", "ops", "Failed runs of each stage per second.", q(`rate(slurmdbd_exporter_stage_errors_total[$__rate_interval])`, "{{stage}}"))).
		WithPanel(series("Snapshot age", unitSeconds, "Time since the served values were published.", q(`slurmdbd_exporter_snapshot_age_seconds`, ""))).
		WithRow(dashboard.NewRowBuilder("slurmdbd")).
		WithPanel(series("Hourly rollup lag", unitSeconds, "Time from slurmdbd's last hourly rollup to the computed moment; above 2 h the rollup is stuck.", q(`slurmdbd_fairshare_rollup_lag_seconds{`+sel+`}`, "{{slurm_cluster}}"))).
		WithPanel(series("Associations left out", unitCount, "Associations dropped by the --collector.* cardinality controls.", q(`slurmdbd_fairshare_associations_dropped{`+sel+`}`, "{{slurm_cluster}}")))
}
