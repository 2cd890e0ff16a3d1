// Package grafana builds the bundled Grafana dashboards as code, with
// grafana-foundation-sdk; `make dashboards` writes them to *.json, and a
// test fails when the committed JSON is stale. It is a module of its own,
// so that the SDK and the PromQL parser its tests use stay out of the
// exporter's build.
//
// Every panel shows data on a default install (serve without
// --collector.* flags, Prometheus evaluating dashboards/prometheus/rules.yml)
// with the variables as Grafana sets them by default:
// e2e/dashboards_e2e_test.go checks it against serve --demo. A panel that a
// healthy cluster may leave empty says so in its description (MayBeEmpty).
package grafana

//lint:file-ignore SA1019 dashboard (schema v1) is what Grafana 9 to 12 provisioning loads; dashboardv2 is Grafana 12's experimental schema

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

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
	unitPlain   = "none"          // ranks, LevelFS, priorities
	unitTime    = "dateTimeAsIso" // a moment, in milliseconds since the epoch
)

// MayBeEmpty starts the sentence of a panel's description that says when
// the panel is empty on a healthy cluster with default flags (no job
// pending, say). e2e/dashboards_e2e_test.go, which fails on any other
// empty query, looks for it.
const MayBeEmpty = "May be empty: "

// target selects the exporter: an HA pair, or one exporter per cluster,
// is told apart by the job and instance variables.
const target = `job=~"$job", instance=~"$instance"`

// sel is the selector every association query carries.
const sel = `slurm_cluster="$slurm_cluster", ` + target

// dsInput is the data source input of the JSON (__inputs): importing a
// dashboard asks for it and sets the datasource variable's default to it.
const dsInput = "DS_PROMETHEUS"

// minGrafana is the oldest Grafana the dashboards are written for
// (__requires): query_result variables, $__rate_interval, data links with
// ${__url_time_range} and ${var:queryparam}.
const minGrafana = "9.0.0"

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

// emptyWhen is desc with the MayBeEmpty sentence.
func emptyWhen(desc, when string) string { return desc + " " + MayBeEmpty + when + "." }

func series(title, unit, desc string, qs ...query) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Targets(targets(qs)).Height(8).Span(12).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
}

func single(title, unit, desc string, qs ...query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Targets(targets(qs)).Height(4).Span(6).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
}

// instant is a table of one instant query, a row per series, without the
// columns that say nothing there (the time, the metric name, the target
// labels).
func instant(title, unit, desc, expr string) *table.PanelBuilder {
	return instantAs(title, unit, desc, expr, "")
}

// instantAs is instant with the value column named value ("": Grafana's
// Value).
func instantAs(title, unit, desc, expr, value string) *table.PanelBuilder {
	t := prometheus.NewDataqueryBuilder().Expr(expr).Instant().Format(prometheus.PromQueryFormatTable).RefId("A").Datasource(ds)
	hide := map[string]bool{"Time": true, "__name__": true, "job": true, "instance": true}
	organize := map[string]any{"excludeByName": hide}
	if value != "" {
		organize["renameByName"] = map[string]string{"Value": value}
	}
	return table.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).WithTarget(t).Height(10).Span(12).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: organize})
}

// link is a dashboard or data link as written, where the SDK's builder
// would place it in Grafana 12's controls menu, out of sight.
type link dashboard.DashboardLink

func (l link) Build() (dashboard.DashboardLink, error) { return dashboard.DashboardLink(l), nil }

// drillDown is a data link to the drill-down on an account and, unless
// user is "", a user: Grafana fills them in from the series or row
// clicked (${__field.labels.account}, ${__data.fields.account}), and the
// time range, data source, exporter and cluster are carried over.
func drillDown(account, user string) []cog.Builder[dashboard.DashboardLink] {
	url := "/d/slurm-fairshare-drilldown/?${__url_time_range}&${datasource:queryparam}&${job:queryparam}&${instance:queryparam}&${slurm_cluster:queryparam}&var-account=" + account
	title := "Drill down to the account"
	if user != "" {
		url += "&var-user=" + user
		title = "Drill down to the association"
	}
	return []cog.Builder[dashboard.DashboardLink]{link{Title: title, Type: dashboard.DashboardLinkTypeLink, Url: &url, Tags: []string{}}}
}

func datasourceVar() *dashboard.DatasourceVariableBuilder {
	in := "${" + dsInput + "}"
	return dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus").
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: &in}, Value: dashboard.StringOrArrayOfString{String: &in}})
}

// labelVar is a variable of the values of label on metric, narrowed by
// filter, in alphabetical order: Grafana takes the first, or All (any
// value) where all.
func labelVar(name, label, metric, filter string, all bool) *dashboard.QueryVariableBuilder {
	def := "label_values(" + metric + "{" + filter + "}, " + label + ")"
	v := dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(ds).
		Query(dashboard.StringOrMap{String: cog.ToPtr(def)}).Definition(def).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
	if all {
		v = v.IncludeAll(true).AllValue(".*")
	}
	return v
}

// resultVar is a variable of the values of label in the result of an
// instant query, in the query's order (no sorting): Grafana takes the
// first, so expr puts first the value the dashboard should open on.
func resultVar(name, label, expr string) *dashboard.QueryVariableBuilder {
	def := "query_result(" + expr + ")"
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(ds).
		Query(dashboard.StringOrMap{String: cog.ToPtr(def)}).Definition(def).Regex(`/\b` + label + `="([^"]*)"/`).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortDisabled)
}

func jobVar() *dashboard.QueryVariableBuilder {
	return labelVar("job", "job", "slurmdbd_exporter_up", "", false)
}

func instanceVar() *dashboard.QueryVariableBuilder {
	return labelVar("instance", "instance", "slurmdbd_exporter_up", `job=~"$job"`, true)
}

func clusterVar() *dashboard.QueryVariableBuilder {
	return labelVar("slurm_cluster", "slurm_cluster", "slurmdbd_fairshare_config_info", target, false)
}

func board(uid, title string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Tags([]string{"slurm", "fairshare", "slurmdbd_exporter"}).
		Refresh("1m").Time("now-7d", "now").Timezone(common.TimeZoneBrowser).Editable().
		Link(link{Title: "slurmdbd_exporter", Type: dashboard.DashboardLinkTypeDashboards, Tags: []string{"slurmdbd_exporter"},
			AsDropdown: true, IncludeVars: true, KeepTime: true,
			Tooltip: "The other slurmdbd_exporter dashboards, with the same exporter, cluster and time range"}).
		WithVariable(datasourceVar()).WithVariable(jobVar()).WithVariable(instanceVar())
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

// configured keeps the series of the algorithm slurm.conf selects: with
// --collector.extended the exporter exports every algorithm's.
const configured = ` and on(slurm_cluster, algorithm, job, instance) slurmdbd_fairshare_config_info{` + sel + `}`

// effectiveUsage is the effective usage of the associations of selector
// s under algorithm alg (a variable or a value): the exported one where
// there is one (classic's by default), otherwise Fair Tree's from what it
// exports by default, normalized shares over LevelFS (LevelFS =
// NormShares / EffectvUsage; 0 at +Inf, no usage).
func effectiveUsage(s, alg string) string {
	return `slurmdbd_fairshare_usage_effective{` + s + `, algorithm=~"` + alg + `"} or label_replace(` +
		`slurmdbd_fairshare_shares_normalized{` + s + `, algorithm="fair_tree", algorithm=~"` + alg + `"} / ignoring(algorithm) slurmdbd_fairshare_level_fs{` + s + `}` +
		`, "algorithm", "fair_tree", "algorithm", "")`
}

func overview() *dashboard.DashboardBuilder {
	users := sel + `, user!=""`
	roots := sel + `, user="", parent="root"`
	return board("slurm-fairshare-overview", "Slurm fairshare: overview").
		Description("Fairshare of a cluster as recomputed from the slurmdbd database: who uses what, how factors are spread, shares against usage, who is last; series and rows link to the drill-down.").
		WithVariable(clusterVar()).
		WithVariable(labelVar("algorithm", "algorithm", "slurmdbd_fairshare_config_info", sel, false)).
		WithRow(dashboard.NewRowBuilder("Cluster")).
		WithPanel(single("User associations", unitCount, "How many user associations the exporter exports for the cluster: the series of slurmdbd_fairshare_shares with a user (assoc_table rows of slurmdbd's database, after the --collector.* controls).",
			q(`count(slurmdbd_fairshare_shares{`+users+`})`, ""))).
		WithPanel(single("Accounts", unitCount, "How many account associations, root included: the series of slurmdbd_fairshare_shares without a user.",
			q(`count(slurmdbd_fairshare_shares{`+sel+`, user=""})`, ""))).
		WithPanel(single("Median user factor", unitRatio, "Median fairshare factor of the user associations under the configured algorithm: recorded by slurm_cluster_algorithm:slurmdbd_fairshare_factor:quantile (rules.yml) from slurmdbd_fairshare_factor, which the exporter computes from the database's shares and usage as slurmctld does.",
			q(`slurm_cluster_algorithm:slurmdbd_fairshare_factor:quantile{`+sel+`, algorithm="$algorithm", quantile="0.5"}`, ""))).
		WithPanel(single("Hourly rollup lag", unitSeconds, "Time from slurmdbd's last hourly rollup (last_ran_table) to the moment the values are computed for: slurmdbd_fairshare_rollup_lag_seconds. It stays under an hour; the RollupStalled alert fires above two.",
			q(`slurmdbd_fairshare_rollup_lag_seconds{`+sel+`}`, ""))).
		WithRow(dashboard.NewRowBuilder("Consumers")).
		WithPanel(series("Top accounts by decayed usage", unitRatio, "Share of the cluster's decayed billing usage of the ten accounts whose own users used most: recorded by slurm_cluster_account:slurmdbd_fairshare_usage_billing_seconds:ratio (rules.yml) from slurmdbd_fairshare_usage_billing_seconds, the usage the exporter rebuilds from slurmdbd's rollups and job table as slurmctld charges it. Click a series to open the account in the drill-down.",
			q(`topk(10, slurm_cluster_account:slurmdbd_fairshare_usage_billing_seconds:ratio{`+sel+`})`, "{{account}}")).
			DataLinks(drillDown("${__field.labels.account}", ""))).
		WithPanel(series("Top users by decayed usage", unitRatio, "Share of root's decayed billing usage (Slurm's NormUsage) of the ten user associations that used most: recorded by slurm_cluster_account_user:slurmdbd_fairshare_usage_billing_seconds:top10_ratio (rules.yml) from slurmdbd_fairshare_usage_billing_seconds. Click a series to open the association in the drill-down.",
			q(`topk(10, slurm_cluster_account_user:slurmdbd_fairshare_usage_billing_seconds:top10_ratio{`+sel+`})`, "{{user}} ({{account}})")).
			DataLinks(drillDown("${__field.labels.account}", "${__field.labels.user}"))).
		WithRow(dashboard.NewRowBuilder("Fairshare")).
		WithPanel(series("Factor distribution", unitRatio, "Quantiles (0.1, 0.5, 0.9) of the user associations' fairshare factor under the configured algorithm: recorded by slurm_cluster_algorithm:slurmdbd_fairshare_factor:quantile (rules.yml) from slurmdbd_fairshare_factor.",
			q(`slurm_cluster_algorithm:slurmdbd_fairshare_factor:quantile{`+sel+`, algorithm="$algorithm"}`, "q{{quantile}}"))).
		WithPanel(series("Shares against effective usage (accounts under root)", unitRatio, "What each of root's children is promised (normalized shares, slurmdbd_fairshare_shares_normalized) against what it used (effective usage: classic's slurmdbd_fairshare_usage_effective; under Fair Tree normalized shares over slurmdbd_fairshare_level_fs, which is the account's usage over root's). Usage above shares lowers the factor of everyone under the account. Click a series to open the account in the drill-down.",
			q(`slurmdbd_fairshare_shares_normalized{`+roots+`, algorithm="$algorithm"}`, "shares {{account}}"),
			q(effectiveUsage(roots, "$algorithm"), "usage {{account}}")).
			DataLinks(drillDown("${__field.labels.account}", ""))).
		WithPanel(instant("Lowest fairshare factors", unitRatio, "The twenty user associations with the lowest fairshare factor under the configured algorithm, lowest first (slurmdbd_fairshare_factor, computed from the database). Under Fair Tree factor = rank / users: these come last in Fair Tree order. Click a row to open it in the drill-down.",
			`sort(bottomk(20, slurmdbd_fairshare_factor{`+users+`, algorithm="$algorithm"}))`).
			DataLinks(drillDown("${__data.fields.account}", "${__data.fields.user}"))).
		WithRow(dashboard.NewRowBuilder("Pending jobs")).
		WithPanel(series("Pending jobs by account", unitCount, emptyWhen("Pending jobs per account, one per partition a job asks for, as sprio lists them (eligible, not held): slurmdbd_priority_pending_jobs, read from the database's job table at each refresh.", "no job is pending"),
			q(`sum by (account) (slurmdbd_priority_pending_jobs{`+sel+`})`, "{{account}}"))).
		WithPanel(series("Median priority by account", unitPlain, emptyWhen("Median multifactor priority of each account's pending jobs (slurmdbd_priority_pending_job_priority_median), recomputed from the database and slurm.conf's weights as slurmctld does; explain --job gives one job's factors.", "no job is pending"),
			q(`max by (account) (slurmdbd_priority_pending_job_priority_median{`+sel+`})`, "{{account}}"))).
		WithPanel(series("What sets pending jobs' priority", unitCount, emptyWhen("Pending jobs by the factor that contributes most to their priority (slurmdbd_priority_pending_jobs_dominant_factor): with fairshare on top, usage decides who starts next; with age, waiting time.", "no job is pending"),
			q(`sum by (factor) (slurmdbd_priority_pending_jobs_dominant_factor{`+sel+`})`, "{{factor}}")))
}

func drilldown() *dashboard.DashboardBuilder {
	one := sel + `, account="$account", user=~"$user"`
	acct := sel + `, account="$account", user=""`
	// The account to open on: the one holding the user association with
	// the lowest factor, then the others by their lowest user factor,
	// then the accounts without users of their own (2: above any factor).
	accounts := `sort(min by (account) (slurmdbd_fairshare_factor{` + sel + `, user!=""}` + configured + `) or max by (account) (slurmdbd_fairshare_shares{` + sel + `, user=""}) * 0 + 2)`
	users := `sort(min by (user) (slurmdbd_fairshare_factor{` + sel + `, account="$account", user!=""}` + configured + `))`
	return board("slurm-fairshare-drilldown", "Slurm fairshare: account and user").
		Description("Why is a priority low? One association's factor, rank, shares against usage over time, and what Fair Tree gives its account: LevelFS among siblings and the block of ranks of its users. Opens on the user association with the lowest factor (explain --user gives the same path on the command line).").
		WithVariable(clusterVar()).
		WithVariable(resultVar("account", "account", accounts).Description("Accounts by the lowest factor of their users, lowest first; accounts without users of their own last")).
		WithVariable(resultVar("user", "user", users).Multi(true).Description("The account's users by factor, lowest first")).
		WithRow(dashboard.NewRowBuilder("Association: $user in $account")).
		WithPanel(series("Fairshare factor", unitRatio, "The association's fairshare factor, computed by the exporter from the database's shares and usage as slurmctld does (slurmdbd_fairshare_factor): the configured algorithm's, and with --collector.extended the other algorithm's and the ticket_based and maui what-if views. Under Fair Tree, factor = rank / users.",
			q(`slurmdbd_fairshare_factor{`+one+`}`, "{{algorithm}} {{user}} {{partition}}"))).
		WithPanel(series("Rank among all users (Fair Tree)", unitPlain, "The association's Fair Tree rank (slurmdbd_fairshare_rank): users are ranked from the number of user associations (first in Fair Tree order, factor 1) down to 1 (last). The number of user associations is slurm_cluster_algorithm:slurmdbd_fairshare_factor:count (rules.yml).",
			q(`slurmdbd_fairshare_rank{`+one+`}`, "rank {{user}} {{partition}}"),
			q(`slurm_cluster_algorithm:slurmdbd_fairshare_factor:count{`+sel+`, algorithm="fair_tree"}`, "users"))).
		WithPanel(series("Normalized shares against effective usage", unitRatio, "What the association is promised among its siblings (normalized shares, slurmdbd_fairshare_shares_normalized) against what it used (effective usage: classic's slurmdbd_fairshare_usage_effective; under Fair Tree its usage over its parent's, normalized shares over slurmdbd_fairshare_level_fs). Usage above shares lowers the factor.",
			q(`slurmdbd_fairshare_shares_normalized{`+one+`}`, "shares {{algorithm}} {{user}} {{partition}}"),
			q(effectiveUsage(one, ".*"), "usage {{algorithm}} {{user}} {{partition}}"))).
		WithPanel(series("Time to fair level (forecast)", unitSeconds, emptyWhen("How long until the user's factor reaches its fair level (its factor if its usage matched its shares), counted from the moment of the latest values: slurmdbd_fairshare_recovery_seconds{threshold=\"fair_level\"} less the time from slurmdbd_fairshare_recovery_computed_timestamp_seconds to slurmdbd_fairshare_computed_timestamp_seconds (it is computed every --forecast.interval, 4h by default; serve --demo runs ahead of the wall clock, which this follows). The forecast assumes the user submits no new jobs, its running jobs run to their time limit, and every other association keeps using the cluster at its rate of the last --forecast.window (7 days); shares stay and no reset comes (docs/forecast.md, explain --forecast). 0: at or above it; +Inf (not drawn): beyond 30 days. A user who submits again is later than this.", "serve runs with --forecast.interval 0, which turns it off, or its first forecast is not done (seconds after the first refresh; the exporter's log says why one failed: stage forecast of slurmdbd_exporter_stage_errors_total)"),
			q(`clamp_min(slurmdbd_fairshare_recovery_seconds{`+one+`, threshold="fair_level"} - on(slurm_cluster, job, instance) group_left() (slurmdbd_fairshare_computed_timestamp_seconds{`+sel+`} - slurmdbd_fairshare_recovery_computed_timestamp_seconds{`+sel+`}), 0)`, "{{user}} {{partition}}"))).
		WithPanel(series("Decayed billing usage", unitSeconds, "RawUsage in billing TRES-seconds: as the exporter rebuilds it from slurmdbd's rollups and job table (slurmdbd_fairshare_usage_billing_seconds) and as Slurm reports it (slurmdbd_fairshare_reported_usage_billing_seconds, from sshare or slurmrestd). A gap between the two is usage drift.",
			q(`slurmdbd_fairshare_usage_billing_seconds{`+one+`}`, "database {{user}} {{partition}}"),
			q(`slurmdbd_fairshare_reported_usage_billing_seconds{`+one+`}`, "Slurm {{user}} {{partition}}"))).
		WithRow(dashboard.NewRowBuilder("Account: $account (Fair Tree)")).
		WithPanel(series("LevelFS of $account and its siblings", unitPlain, "Fair Tree's LevelFS (normalized shares over effective usage, slurmdbd_fairshare_level_fs) of the account and of the users and accounts beside it under the same parent: Fair Tree visits siblings highest first, so an account below its siblings puts all its users after theirs. +Inf is no usage; a FairShare=parent account has none.",
			q(`slurmdbd_fairshare_level_fs{`+sel+`} and on(slurm_cluster, parent, job, instance) slurmdbd_fairshare_shares{`+acct+`}`, "{{account}} {{user}} {{partition}}"))).
		WithPanel(series("Ranks of the users under $account", unitPlain, "The block of Fair Tree ranks the users under the account hold (slurmdbd_fairshare_subtree_rank_max and _min, from the exporter's ranks): Fair Tree ranks a subtree's users one after another, so where the block lies is what the account's LevelFS among its siblings, and its ancestors', decided.",
			q(`slurmdbd_fairshare_subtree_rank_max{`+acct+`}`, "highest (first)"),
			q(`slurmdbd_fairshare_subtree_rank_min{`+acct+`}`, "lowest (last)"))).
		WithPanel(instant("LevelFS of $account's children", unitPlain, "LevelFS (slurmdbd_fairshare_level_fs) of the account's users and sub-accounts, highest first: the order in which Fair Tree visits them. +Inf is no usage. Click a row to drill down to it.",
			`sort_desc(slurmdbd_fairshare_level_fs{`+sel+`, parent="$account"})`).
			DataLinks(drillDown("${__data.fields.account}", "${__data.fields.user}")))
}

func drift() *dashboard.DashboardBuilder {
	return board("slurm-fairshare-drift", "Slurm fairshare: drift").
		Description("What Slurm reports against what the exporter computes. Formula drift: slurmctld computing with rules other than slurm.conf's. Usage drift: the database's usage against slurmctld's (lost state, a reset). The drift series exist while a report from Slurm is fresh.").
		WithVariable(clusterVar()).
		WithVariable(labelVar("account", "account", "slurmdbd_fairshare_shares", sel, true)).
		WithRow(dashboard.NewRowBuilder("Now")).
		WithPanel(single("Beyond tolerance: formula", unitCount, "Associations whose formula drift (Slurm's values against the configured algorithm replayed on Slurm's own shares and usage) exceeds --drift.formula-tolerance: the most over the drifting values, recorded by slurm_cluster_kind:slurmdbd_fairshare_drift_beyond_tolerance_associations:max (rules.yml). Should be 0.",
			q(`slurm_cluster_kind:slurmdbd_fairshare_drift_beyond_tolerance_associations:max{`+sel+`, kind="formula"}`, ""))).
		WithPanel(single("Beyond tolerance: usage", unitCount, "Associations whose usage drift (the database's rebuilt usage against Slurm's RawUsage, and what it does to the factor) exceeds --drift.usage-tolerance or --drift.factor-tolerance: the most over the drifting values, recorded by slurm_cluster_kind:slurmdbd_fairshare_drift_beyond_tolerance_associations:max (rules.yml).",
			q(`slurm_cluster_kind:slurmdbd_fairshare_drift_beyond_tolerance_associations:max{`+sel+`, kind="usage"}`, ""))).
		WithPanel(single("Algorithm mismatch", unitBool, "slurmctld applies another algorithm than slurm.conf's (slurmdbd_fairshare_algorithm_mismatch, inferred from the reported values): a PriorityFlags change applied by scontrol reconfigure, not yet by a restart.",
			q(`max(slurmdbd_fairshare_algorithm_mismatch{`+sel+`})`, ""))).
		WithPanel(single("Reported source up", unitBool, "Whether what Slurm reports (sshare or slurmrestd) was read and is fresh (slurmdbd_exporter_up{source=\"reported\"}); drift is withdrawn while it is not.",
			q(`max(slurmdbd_exporter_up{`+target+`, source="reported"})`, ""))).
		WithRow(dashboard.NewRowBuilder("Over time")).
		WithPanel(series("Largest drift", unitPlain, "Largest absolute drift over the cluster's associations, per kind and value (slurmdbd_fairshare_drift_max): formula drift should be 0 beyond print precision; usage drift of raw_usage is relative to the larger value. Beside it, the largest usage drift the inputs' unknowns explain (slurmdbd_fairshare_drift_bound: integer RawUsage, the decay and running jobs' charge between two possible decay-pass moments); drift is flagged only beyond it.",
			q(`slurmdbd_fairshare_drift_max{`+sel+`}`, "{{kind}} {{value}}"),
			q(`slurmdbd_fairshare_drift_bound{`+sel+`, kind="usage"}`, "bound {{kind}} {{value}}"))).
		WithPanel(series("Decay-pass phase", unitSeconds, "How far apart slurmctld's last decay pass and the one the compared database usage was rebuilt for may be (slurmdbd_fairshare_decay_phase_uncertainty_seconds), by where the phase came from: state_file (priority_last_decay_ran), inferred (from successive reports), unknown (the whole PriorityCalcPeriod). The usage bound grows with it.",
			q(`slurmdbd_fairshare_decay_phase_uncertainty_seconds{`+sel+`}`, "{{source}}"))).
		WithPanel(series("Associations beyond tolerance", unitCount, "Associations beyond the exporter's tolerances, per kind and value (slurmdbd_fairshare_drift_beyond_tolerance_associations; value=associations: present on one side only). The drift alerts fire on these.",
			q(`slurmdbd_fairshare_drift_beyond_tolerance_associations{`+sel+`}`, "{{kind}} {{value}}"))).
		WithRow(dashboard.NewRowBuilder("Computed against reported")).
		WithPanel(series("Fairshare factor: computed and reported", unitRatio, "The configured algorithm's factor computed from the database (slurmdbd_fairshare_factor) and Slurm's (slurmdbd_fairshare_reported_factor, from sshare or slurmrestd), for the selected accounts' user associations.",
			q(`slurmdbd_fairshare_factor{`+sel+`, account=~"$account"}`+configured, "computed {{account}} {{user}}"),
			q(`slurmdbd_fairshare_reported_factor{`+sel+`, account=~"$account"}`, "reported {{account}} {{user}}"))).
		WithPanel(instant("Largest usage differences", unitSeconds, "The twenty associations whose usage differs most between the database (slurmdbd_fairshare_usage_billing_seconds) and Slurm (slurmdbd_fairshare_reported_usage_billing_seconds), as an absolute difference in billing TRES-seconds. Click a row to drill down to it.",
			`topk(20, abs(slurmdbd_fairshare_usage_billing_seconds{`+sel+`, account=~"$account"} - on(slurm_cluster, account, user, partition, job, instance) slurmdbd_fairshare_reported_usage_billing_seconds{`+sel+`, account=~"$account"}))`).
			DataLinks(drillDown("${__data.fields.account}", "${__data.fields.user}"))).
		WithPanel(instantAs("Drifting associations", unitPlain, emptyWhen("The user associations drifting the most on usage beyond tolerance, worst first, and those on one side only (slurmdbd_fairshare_drift_association: at most --drift.named-associations per cluster), each with the cause the evidence supports: reset or restart only on a loss the exporter saw, billing_rounding, others_usage, only_database, only_slurmctld, unexplained (docs/alerts.md#usagedrift). drift is the database's minus Slurm's: raw_usage relative to the larger (0.75: three quarters of the usage missing in slurmctld), fairshare the factors' difference, associations 1. Click a row to drill down to it.", "nothing drifts beyond tolerance, as on a healthy cluster"),
			`sort_desc(abs(slurmdbd_fairshare_drift_association{`+sel+`, account=~"$account"}))`, "drift").
			DataLinks(drillDown("${__data.fields.account}", "${__data.fields.user}"))).
		// The loss detector compares successive reports of Slurm, not the
		// database: serve exports its counter (0 until a loss) for
		// slurm.conf's cluster whenever it reads a report; the last
		// losses exist only once one happened.
		WithRow(dashboard.NewRowBuilder("Usage losses (no database needed)")).
		WithPanel(series("Usage losses", unitCount, emptyWhen("User associations whose RawUsage, as Slurm reports it, fell between two reads by more than decay and sshare's truncation explain (increase of slurmdbd_fairshare_usage_losses_total), per kind: between_passes, two reads of one slurmctld boot (usually sacctmgr modify ... set RawUsage=0); across_restart, the first read of a new boot against the last of the one before (slurmctld restarted from an older checkpoint or without its assoc_usage state file). Seen at the next read, without the database. Should be 0: the UsageLost alert fires on anything else; the table beside names the associations, the exporter's log their usage before and after, and docs/alerts.md#usagelost says what to do.", "serve reads no report from Slurm (--reported.source none)"),
			q(`increase(slurmdbd_fairshare_usage_losses_total{`+sel+`}[$__rate_interval])`, "{{kind}}"))).
		WithPanel(instantAs("Last usage losses", unitTime, emptyWhen("The last 20 user associations that lost usage, latest first, with the kind of loss and when the report that showed it was read (slurmdbd_fairshare_usage_loss_timestamp_seconds, kept since the exporter started). Look for the same association in the exporter's log (\"RawUsage fell by more than decay explains\", with the usage before and after) and see docs/alerts.md#usagelost. Click a row to drill down to it: Slurm's usage against the database's.", "no usage lost since the exporter started, as on a healthy cluster"),
			`sort_desc(slurmdbd_fairshare_usage_loss_timestamp_seconds{`+sel+`} * 1000)`, "read at").
			DataLinks(drillDown("${__data.fields.account}", "${__data.fields.user}"))).
		// Checked for slurm.conf's cluster, on the jobs that started since
		// the file last changed and ran after the last hourly rollup.
		WithRow(dashboard.NewRowBuilder("Billing: slurmctld's against slurm.conf's weights")).
		WithPanel(series("Billing ratio", unitRatio, emptyWhen("Billing slurmctld recorded for the jobs of each partition over what slurm.conf's TRESBillingWeights and PriorityFlags give (slurmdbd_fairshare_billing_ratio), over the jobs that started since slurm.conf last changed and ran after the last hourly rollup. 1 when they agree; 0.91 when slurmctld's weights are 10% lower. slurmctld charges fairshare usage by its own billing.", "no such job is there (the exporter checks slurm.conf's cluster only)"),
			q(`slurmdbd_fairshare_billing_ratio{`+sel+`}`, "{{partition}}"))).
		WithPanel(series("Jobs billed otherwise", unitCount, emptyWhen("Of the jobs checked (slurmdbd_fairshare_billing_checked_jobs), those slurmctld billed other than slurm.conf's weights give (slurmdbd_fairshare_billing_mismatched_jobs), per partition. Should be 0: the BillingWeightsMismatch alert fires on anything else, the exporter's log names a job, and docs/alerts.md#billingweightsmismatch says what to do.", "no such job is there (the exporter checks slurm.conf's cluster only)"),
			q(`slurmdbd_fairshare_billing_mismatched_jobs{`+sel+`}`, "billed otherwise {{partition}}"),
			q(`slurmdbd_fairshare_billing_checked_jobs{`+sel+`}`, "checked {{partition}}")))
}

func health() *dashboard.DashboardBuilder {
	return board("slurmdbd-exporter-health", "slurmdbd_exporter: health").
		Description("The exporter and its sources: up, age, refresh stages, rollups.").
		WithVariable(clusterVar()).
		WithRow(dashboard.NewRowBuilder("Sources")).
		WithPanel(series("Sources up", unitBool, "1: the last read of the source succeeded and is fresh (slurmdbd_exporter_up): db is slurmdbd's database, reported is sshare or slurmrestd.",
			q(`slurmdbd_exporter_up{`+target+`}`, "{{source}} {{instance}}"))).
		WithPanel(series("Source age", unitSeconds, "Time since each source was last read successfully (slurmdbd_exporter_source_age_seconds, at scrape time).",
			q(`slurmdbd_exporter_source_age_seconds{`+target+`}`, "{{source}} {{instance}}"))).
		WithPanel(series("Clusters read", unitBool, "1: the cluster's tables were read from the database at the last refresh (slurmdbd_exporter_cluster_up); a cluster of cluster_table without tables of its own is 0.",
			q(`slurmdbd_exporter_cluster_up{`+target+`}`, "{{slurm_cluster}} {{instance}}"))).
		WithRow(dashboard.NewRowBuilder("Refresh")).
		WithPanel(series("Stage duration", unitSeconds, "How long the last run of each refresh stage took (slurmdbd_exporter_stage_duration_seconds): config (slurm.conf), connect, db (associations and usage), extras (pending jobs, Maui windows), reported (sshare or slurmrestd), build (algorithms and drift), publish (rendering the metrics).",
			q(`slurmdbd_exporter_stage_duration_seconds{`+target+`}`, "{{stage}} {{instance}}"))).
		WithPanel(series("Stage errors", "ops", "Failed runs of each stage per second (rate of slurmdbd_exporter_stage_errors_total); the ExporterRefreshFailing alert fires when a stage keeps failing.",
			q(`rate(slurmdbd_exporter_stage_errors_total{`+target+`}[$__rate_interval])`, "{{stage}} {{instance}}"))).
		WithPanel(series("Snapshot age", unitSeconds, "Time since the served values were published (slurmdbd_exporter_snapshot_age_seconds, at scrape time): the refresh loop publishes after every refresh and report.",
			q(`slurmdbd_exporter_snapshot_age_seconds{`+target+`}`, "{{instance}}"))).
		WithRow(dashboard.NewRowBuilder("slurmdbd")).
		WithPanel(series("Hourly rollup lag", unitSeconds, "Time from slurmdbd's last hourly rollup (last_ran_table) to the computed moment (slurmdbd_fairshare_rollup_lag_seconds); above 2 h the rollup is stuck.",
			q(`slurmdbd_fairshare_rollup_lag_seconds{`+sel+`}`, "{{slurm_cluster}}"))).
		WithPanel(series("Associations left out", unitCount, "Associations dropped by --collector.max-associations (slurmdbd_fairshare_associations_dropped); 0 unless the cluster has more.",
			q(`slurmdbd_fairshare_associations_dropped{`+sel+`}`, "{{slurm_cluster}}")))
}

// input and requirement are the entries of __inputs and __requires, as
// Grafana's "Export for sharing externally" writes them.
type input struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Type        string `json:"type"`
	PluginID    string `json:"pluginId"`
	PluginName  string `json:"pluginName"`
}

type requirement struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// panelNames are the names Grafana gives the panel plugins used.
var panelNames = map[string]string{"stat": "Stat", "table": "Table", "timeseries": "Time series"}

// JSON is a dashboard as Grafana imports it, from a file, grafana.com or
// file provisioning: __inputs asks for the Prometheus data source on
// import (and sets the datasource variable to it; provisioning leaves the
// variable at Grafana's default Prometheus), __requires lists the Grafana
// version, data source and panel plugins it needs.
func JSON(b *dashboard.DashboardBuilder) ([]byte, error) {
	d, err := b.Build()
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	req := []requirement{
		{Type: "grafana", ID: "grafana", Name: "Grafana", Version: minGrafana},
		{Type: "datasource", ID: "prometheus", Name: "Prometheus", Version: "1.0.0"},
	}
	var kinds []string
	for _, p := range d.Panels {
		if p.Panel != nil && !slices.Contains(kinds, p.Panel.Type) {
			kinds = append(kinds, p.Panel.Type)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		req = append(req, requirement{Type: "panel", ID: k, Name: panelNames[k]})
	}
	head, err := json.Marshal(struct {
		Inputs   []input       `json:"__inputs"`
		Requires []requirement `json:"__requires"`
	}{
		Inputs: []input{{Name: dsInput, Label: "Prometheus", Type: "datasource", PluginID: "prometheus", PluginName: "Prometheus",
			Description: "The Prometheus that scrapes slurmdbd_exporter and evaluates its rules (rules.yml)"}},
		Requires: req,
	})
	if err != nil {
		return nil, err
	}
	// __inputs and __requires first, then the dashboard's own fields in
	// the SDK's order
	all := append(head[:len(head)-1:len(head)-1], ',')
	all = append(all, strings.TrimPrefix(string(body), "{")...)
	var out bytes.Buffer
	if err := json.Indent(&out, all, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
