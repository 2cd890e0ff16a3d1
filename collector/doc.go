package collector

import (
	"fmt"
	"strings"
)

// MetricsDoc is docs/metrics.md, generated from the descriptors.
func MetricsDoc() string {
	var b strings.Builder
	b.WriteString("# Metrics\n\nGenerated from the collector's descriptors (`go test ./collector -run TestMetricsDoc -update`); a test fails when it is stale.\n\n")
	b.WriteString("Association labels: `slurm_cluster`, `account`, `user` (empty on account rows and root), `partition`, `parent` (the parent account; empty for root). ")
	b.WriteString("Values computed from the database are as of the last refresh; a scrape never reads the database or runs Slurm commands.\n\n")
	b.WriteString("| metric | labels | help |\n|---|---|---|\n")
	for _, m := range Metrics {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", m.Name, strings.Join(m.Labels, ", "), m.Help)
	}
	return b.String()
}
