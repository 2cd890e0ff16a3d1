package slurmdbd

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// BenchmarkLoad measures a cold load (the whole history) and a steady
// incremental refresh of a synthetic cluster written by internal/gen into
// the schema real slurmdbd 22.05 created: 10,000 associations, one month
// of hourly rollups (about one user in ten active each hour), 7-day
// half-life.
func BenchmarkLoad(b *testing.B) {
	srv := mariadbtest.Start(b, "")
	ctx := context.Background()
	srv.Load("bench", "../testdata/slurm-22.05/slurm_acct_db.sql.gz")
	root, err := sql.Open("mysql", srv.DSN("root", "", "bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	var cluster string
	if err := root.QueryRowContext(ctx, "SELECT name FROM cluster_table LIMIT 1").Scan(&cluster); err != nil {
		b.Fatal(err)
	}
	end := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	st, err := gen.Fill(ctx, root, gen.Config{Cluster: cluster, Associations: 10000, Depth: 5, Months: 1, End: end, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %+v", st)
	d, err := Open(ctx, srv.DSN("root", "", "bench"), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, err := d.Cluster(ctx, cluster)
	if err != nil {
		b.Fatal(err)
	}
	passes := fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 18}
	at := end.Add(20 * time.Minute)
	b.Run(fmt.Sprintf("cold/%dassocs/%dhourrows", st.Associations, st.HourRows), func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Snapshot(ctx, at, passes, time.Time{}, time.UTC); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("refresh/%dassocs", st.Associations), func(b *testing.B) {
		r := &Refresher{Cluster: c, Passes: passes, Location: time.UTC}
		if _, err := r.Refresh(ctx, at); err != nil {
			b.Fatal(err)
		}
		t := at
		for b.Loop() {
			t = t.Add(5 * time.Minute)
			if _, err := r.Refresh(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
		if r.FullLoads != 1 {
			b.Errorf("%d full loads", r.FullLoads)
		}
	})
}
