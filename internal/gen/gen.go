// Package gen fills a slurmdbd database with a synthetic cluster for
// benchmarks: an association tree (fairshare.Synthetic's shapes, with a
// consistent lft/rgt nested set, the accounts and users in acct_table and
// user_table, so that a slurmctld started after it loads the same tree)
// and months of finished jobs, which keep about one user association in
// ten busy at a time (one user in ten idle for the last two thirds of the
// months), with the hourly, daily and monthly rollups slurmdbd would make
// of them, and running jobs across the last rollup. It writes into the
// tables real slurmdbd created (load a real dump, or let slurmdbd create
// them, first); deterministic by seed.
package gen

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Config says what to generate.
type Config struct {
	Cluster      string // an existing cluster of cluster_table
	Associations int
	Depth        int
	Months       int
	// End is the end of the last rolled-up hour (an hour boundary).
	End  time.Time
	Seed uint64
	// JobsPerHour finished jobs end in an hour, on average; at least 1.
	// All usage is theirs, so the fewer they are, the longer they run:
	// users/10/JobsPerHour hours on average.
	JobsPerHour int
	// AllTRES writes rollup rows of cpu, node and billing, as real
	// slurmdbd does for jobs that allocate them (the jobs' tres_alloc);
	// otherwise billing alone, which is all fairshare reads.
	AllTRES bool
	// Site shapes the jobs as a production site's (SiteWeights): each
	// allocates memory, runs in partition SitePartition billing
	// SiteWeights (a fraction, which tres_alloc and the rollups truncate),
	// and one in ten runs under QOS high (UsageFactor 2), one in ten
	// under scavenger (UsageFactor 0), which Fill adds to qos_table.
	Site bool
}

// SitePartition and SiteWeights are the partition of Config.Site's jobs
// and its TRESBillingWeights: a job of c CPUs and 1500·c MB bills
// c·(1 + 1500·0.25/1024).
const (
	SitePartition = "p1"
	SiteWeights   = "CPU=1.0,Mem=0.25G"
	siteMemPerCPU = 1500
)

// allTRES are the TRES jobs allocate (newJob; memory only Site's), in
// tres_alloc's and the rollups' primary key order: cpu, mem, node,
// billing.
var allTRES = [4]int{1, 2, 4, 5}

// tres are the indexes in allTRES of the TRES the rollups hold.
func (c Config) tres() []int {
	switch {
	case c.AllTRES && c.Site:
		return []int{0, 1, 2, 3}
	case c.AllTRES:
		return []int{0, 2, 3}
	}
	return []int{3}
}

// Stats says what was written.
type Stats struct {
	Associations, HourRows, DayRows, MonthRows, Jobs, RunningJobs int
}

// Fill replaces the cluster's associations, rollups and jobs. db must be
// able to write (a root connection, not the exporter's).
func Fill(ctx context.Context, db *sql.DB, c Config) (Stats, error) {
	var st Stats
	if c.JobsPerHour < 1 {
		return st, fmt.Errorf("JobsPerHour %d: all usage comes from jobs, at least 1 an hour", c.JobsPerHour)
	}
	tree := fairshare.Synthetic(c.Associations, c.Depth, c.Seed)
	if err := c.clearTables(ctx, db); err != nil {
		return st, err
	}
	if err := c.writeAssociations(ctx, db, tree); err != nil {
		return st, err
	}
	if c.Site {
		if _, err := db.ExecContext(ctx, "INSERT INTO qos_table (creation_time, mod_time, deleted, id, name, description, usage_factor) VALUES"+
			" (0, 0, 0, ?, 'high', 'UsageFactor 2', 2), (0, 0, 0, ?, 'scavenger', 'UsageFactor 0', 0)"+
			" ON DUPLICATE KEY UPDATE usage_factor = VALUES(usage_factor)", siteHigh, siteScavenger); err != nil {
			return st, fmt.Errorf("adding the site's QOS: %w", err)
		}
	}
	st.Associations = tree.Len()
	err := c.writeJobs(ctx, db, tree, &st)
	return st, err
}

// table is the cluster's table s, quoted.
func (c Config) table(s string) string { return "`" + c.Cluster + "_" + s + "`" }

// clearTables empties the cluster's tables Fill writes.
func (c Config) clearTables(ctx context.Context, db *sql.DB) error {
	for _, t := range []string{"assoc_table", "assoc_usage_hour_table", "assoc_usage_day_table", "assoc_usage_month_table", "job_table", "last_ran_table"} {
		if _, err := db.ExecContext(ctx, "DELETE FROM "+c.table(t)); err != nil {
			return fmt.Errorf("clearing %s: %w", t, err)
		}
	}
	return nil
}
