package collector

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricsDoc is docs/metrics.md, generated from the descriptors.
func MetricsDoc() string {
	var b strings.Builder
	b.WriteString("# Metrics\n\nGenerated from the collector's descriptors (`go test ./collector -run TestMetricsDoc -update`); a test fails when it is stale.\n\n")
	b.WriteString("Association labels: `slurm_cluster`, `account`, `user` (empty on account rows and root), `partition`, `parent` (the parent account; empty for root). ")
	b.WriteString("Values computed from the database are as of the last refresh; a scrape never reads the database or runs Slurm commands.\n\n")
	b.WriteString("| metric | labels | help |\n|---|---|---|\n")
	for _, m := range append(slices.Clip(Metrics), buildInfoDoc()) {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", m.Name, strings.Join(m.Labels, ", "), m.Help)
	}
	return b.String()
}

// buildInfoDoc is build_info as client_golang's collector describes it:
// gathered, since its labels are constant labels a Desc does not expose.
func buildInfoDoc() MetricInfo {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(buildInfo())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		panic(fmt.Sprintf("build_info gathered as %v: %v", mfs, err))
	}
	m := MetricInfo{Name: mfs[0].GetName(), Help: mfs[0].GetHelp()}
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		m.Labels = append(m.Labels, l.GetName())
	}
	return m
}
