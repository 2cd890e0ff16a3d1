package slurmdbd

import (
	"strings"
	"testing"
)

// TestQueriesFill: every per-cluster query takes the cluster's name in
// each of its tables' names, inside backticks, and every part fill is
// given, as the code gives them; a verb without its part, or a part
// without its verb, would reach the server as "%!s(MISSING)" or
// "%!(EXTRA ...)". Cluster.Job's query is run by no other test.
func TestQueriesFill(t *testing.T) {
	c := Cluster{Name: "c-1"}
	for name, q := range map[string]string{
		"sqlProbe":          c.fill(sqlProbe, "assoc_table"),
		"sqlAssociations":   c.fill(sqlAssociations, "`id_parent`", "`lineage`", assocOrder(Layout{Lineage: true})),
		"sqlAssocVersion":   c.fill(sqlAssocVersion),
		"sqlLastRan":        c.fill(sqlLastRan),
		"sqlAssocUsage":     c.fill(sqlAssocUsage, "hour", "`id_tres` = ?", " AND `mod_time` >= 3600"),
		"sqlQOSUsage":       c.fill(sqlQOSUsage, "day", "`id_tres` = ?"),
		"sqlOldest":         c.fill(sqlOldest, "month"),
		"sqlOldestByMod":    c.fill(sqlOldestByMod),
		"sqlJobs":           c.fill(sqlJobs, submitCharge(true)),
		"sqlEnded":          c.fill(sqlEnded, submitCharge(false)),
		"sqlEndedHet":       c.fill(sqlEndedHet, submitCharge(true)),
		"sqlRunningJobs":    c.fill(sqlRunningJobs, submitCharge(false)),
		"sqlPendingJobs":    c.fill(sqlPendingJobs),
		"sqlJobRows":        c.fill(sqlJobRows),
		"sqlClusterTRES":    c.fill(sqlClusterTRES),
		"sqlChangedHours":   c.fill(sqlChangedHours, "`id_tres` <> ?"),
		"sqlRerolledByMod":  c.fill(sqlRerolledByMod),
		"sqlRerolledByTime": c.fill(sqlRerolledByTime),
		"sqlColdSums":       c.fill(sqlColdSums, "hour", "0", "1,2", "5"),
	} {
		if strings.Contains(q, "%!") || !strings.Contains(q, "`c-1_") || strings.Count(q, "`")%2 != 0 {
			t.Errorf("%s filled: %s", name, q)
		}
	}
	if _, err := rollupTable("week"); err == nil || !strings.Contains(err.Error(), `"week"`) {
		t.Errorf("a period of no rollup table: %v", err)
	}
}
