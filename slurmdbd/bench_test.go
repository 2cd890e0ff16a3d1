package slurmdbd

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// BenchmarkLoad measures a cold load (the whole history) and a steady
// incremental refresh of a synthetic cluster written by internal/gen into
// the schema real slurmdbd 22.05 created: 10,000 associations, one month
// of hourly rollups (about one user in ten active each hour), 7-day
// half-life.
//
// With SLURMDBD_BENCH_SITE=1 the jobs are a site's (gen.Config.Site) and
// the refreshers price them by the partition's weights and reweigh their
// rolled-up hours.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	site := os.Getenv("SLURMDBD_BENCH_SITE") == "1"
	g := generate(b, mariadbtest.Start(b, ""), "slurm-22.05", gen.Config{Associations: 10000, Depth: 5, Months: 1, Seed: 1, JobsPerHour: 100, Site: site})
	c, st, end := g.c, g.stats, genEnd
	b.Logf("generated %+v", st)
	passes := fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 18}
	var billing *usage.BillingRules
	if site {
		billing = &usage.BillingRules{Weights: map[string]map[string]float64{gen.SitePartition: {"cpu": 1, "mem": 0.25 / 1024}}}
	}
	at := end.Add(20 * time.Minute)
	b.Run(fmt.Sprintf("cold/%dassocs/%dhourrows", st.Associations, st.HourRows), func(b *testing.B) {
		for b.Loop() {
			if _, err := (&Refresher{Cluster: c, Passes: passes, Location: time.UTC, Billing: billing}).Refresh(ctx, at); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("refresh/%dassocs", st.Associations), func(b *testing.B) {
		r := &Refresher{Cluster: c, Passes: passes, Location: time.UTC, Billing: billing}
		if _, err := r.Refresh(ctx, at); err != nil {
			b.Fatal(err)
		}
		t := at
		for b.Loop() {
			t = t.Add(time.Minute) // serve's default --refresh-interval
			if _, err := r.Refresh(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
		if r.FullLoads != 1 {
			b.Errorf("%d full loads", r.FullLoads)
		}
	})
}

// BenchmarkLoadDSN is BenchmarkLoad on a database that exists already:
// SLURMDBD_BENCH_DSN names it (a cluster written by cmd/slurmdbd-gen,
// whose last rolled-up hour ends at SLURMDBD_BENCH_END, RFC 3339), so that
// a cold load of 100k associations and a year can be profiled without
// generating them again (15 minutes).
func BenchmarkLoadDSN(b *testing.B) {
	dsn, endS := os.Getenv("SLURMDBD_BENCH_DSN"), os.Getenv("SLURMDBD_BENCH_END")
	if dsn == "" || endS == "" {
		b.Skip("SLURMDBD_BENCH_DSN and SLURMDBD_BENCH_END name a generated database")
	}
	end, err := time.Parse(time.RFC3339, endS)
	if err != nil {
		b.Fatalf("SLURMDBD_BENCH_END: %v", err)
	}
	ctx := context.Background()
	d, err := Open(ctx, dsn, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	names, err := d.Clusters(ctx)
	if err != nil || len(names) == 0 {
		b.Fatalf("clusters: %v %v", names, err)
	}
	c, err := d.Cluster(ctx, names[0])
	if err != nil {
		b.Fatal(err)
	}
	passes := fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 18}
	at := end.Add(20 * time.Minute)
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			r := &Refresher{Cluster: c, Passes: passes, Location: time.UTC}
			if _, err := r.Refresh(ctx, at); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.Refined), "refined")
		}
	})
	b.Run("refresh", func(b *testing.B) {
		r := &Refresher{Cluster: c, Passes: passes, Location: time.UTC}
		if _, err := r.Refresh(ctx, at); err != nil {
			b.Fatal(err)
		}
		t := at
		for b.Loop() {
			t = t.Add(time.Minute)
			if _, err := r.Refresh(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
	})
}
