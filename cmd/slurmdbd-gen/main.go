// Command slurmdbd-gen fills a slurmdbd database with a synthetic cluster
// for scale measurements (internal/gen): N associations, months of
// finished jobs that keep about one user association in ten busy at a
// time, the hourly, daily and monthly rollups slurmdbd would make of
// them, and running jobs. Deterministic by seed.
//
// It writes into tables real slurmdbd created, replacing the cluster's
// associations, rollups and jobs. Either let slurmdbd create them, or load
// the real 22.05 schema this repository carries:
//
//	mariadb -e 'CREATE DATABASE slurm_gen'
//	zcat testdata/slurm-22.05/slurm_acct_db.sql.gz | mariadb slurm_gen
//	go run ./cmd/slurmdbd-gen --dsn 'root@tcp(127.0.0.1:3306)/slurm_gen' --associations 100000 --months 12
//
// slurmctld loads the same tree when started after it (remove its
// assoc_mgr state files first): sacctmgr load takes minutes at this size.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kong"
	_ "github.com/go-sql-driver/mysql"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
)

type cli struct {
	DSN          string    `required:"" env:"SLURMDBD_GEN_DSN" help:"DSN of a user who can write the database."`
	Cluster      string    `help:"Cluster to fill (default: the first live one in cluster_table)."`
	Associations int       `default:"11112" help:"Associations, root included."`
	Depth        int       `default:"6" help:"Levels below root to the deepest users (users sit at depth 2 to this)."`
	Months       int       `default:"1" help:"Months of rollups before --end."`
	End          time.Time `help:"End of the last rolled-up hour (RFC 3339; default: the last full hour)."`
	JobsPerHour  int       `default:"100" help:"Finished jobs ending in an hour, on average. All usage is theirs: the fewer, the longer they run."`
	AllTRES      bool      `name:"all-tres" help:"Roll up cpu, node and billing, as real slurmdbd does (three rows an hour where billing alone is one)."`
	Seed         uint64    `default:"1"`
}

func main() {
	var c cli
	kong.Parse(&c, kong.Description("Fill a slurmdbd database with a synthetic cluster."))
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "slurmdbd-gen:", err)
		os.Exit(1)
	}
}

func run(c cli) error {
	ctx := context.Background()
	db, err := sql.Open("mysql", c.DSN)
	if err != nil {
		return fmt.Errorf("--dsn: %w", err)
	}
	defer db.Close()
	if c.Cluster == "" {
		if err := db.QueryRowContext(ctx, "SELECT name FROM cluster_table WHERE deleted = 0 ORDER BY creation_time LIMIT 1").Scan(&c.Cluster); err != nil {
			return fmt.Errorf("finding a cluster in cluster_table: %w", err)
		}
	}
	if c.End.IsZero() {
		c.End = time.Now().Truncate(time.Hour)
	}
	t0 := time.Now()
	st, err := gen.Fill(ctx, db, gen.Config{Cluster: c.Cluster, Associations: c.Associations, Depth: c.Depth, Months: c.Months,
		End: c.End, Seed: c.Seed, JobsPerHour: c.JobsPerHour, AllTRES: c.AllTRES})
	if err != nil {
		return err
	}
	fmt.Printf("cluster %s: %d associations, %d hour, %d day, %d month rows, %d finished and %d running jobs in %v\n",
		c.Cluster, st.Associations, st.HourRows, st.DayRows, st.MonthRows, st.Jobs, st.RunningJobs, time.Since(t0).Round(time.Millisecond))
	return nil
}
