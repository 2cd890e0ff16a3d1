package slurmdbd

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TestColdLoadTiers: a full load of six months at a 7-day half-life reads
// hours, days and months (coldLoad, usage.Cold) and lands, for every association and
// TRES, within usage.CoarseTolerance of the exact sum over every hourly row
// (usage.Inputs.Bucket row by row, the derivation the tiers replace). The users idle
// for four months, whose usage is all in coarse periods, are read again
// from hours, and about as many busy ones whose last seven weeks were
// quiet beside the weeks before (each user's jobs come in runs a day or
// two apart, so users differ); not all. The rollups hold cpu, node and
// billing, as real ones do: by default only billing is read, with AllTRES
// every TRES.
func TestColdLoadTiers(t *testing.T) {
	ctx := context.Background()
	g := generate(t, mariadbtest.Start(t, ""), "slurm-22.05", gen.Config{Associations: 400, Depth: 4, Months: 6, Seed: 5, JobsPerHour: 10, AllTRES: true})
	root, c, st, end := g.root, g.c, g.stats, genEnd
	// coldLoaded is a full load 20 minutes after the last rollup, and what
	// Bucket needs to weigh rows as of that moment
	coldLoaded := func(p fairshare.Passes, allTRES bool) (*Refresher, Layout, *usage.Inputs) {
		c := c
		c.AllTRES = allTRES
		r := &Refresher{Cluster: c, Passes: p, Location: time.UTC}
		at := end.Add(20 * time.Minute)
		if _, err := r.Refresh(ctx, at); err != nil {
			t.Fatal(err)
		}
		l, _ := c.Layout(ctx)
		lastRan, _ := c.LastRan(ctx)
		return r, l, &usage.Inputs{Passes: p, At: float64(at.Unix()), LastHourly: lastRan.Hourly, Location: time.UTC}
	}
	for i, p := range []fairshare.Passes{
		{HalfLife: 7 * 86400, Period: 300, Phase: 18, ChargeJobEnd: true},
		{HalfLife: 7 * 86400, Period: 420, Phase: 100, ChargeJobEnd: true}, // passes out of step with hours
		{HalfLife: 0, Period: 300, ChargeJobEnd: true},                     // no decay: coarse periods are exact
	} {
		allTRES := i == 0
		r, l, in := coldLoaded(p, allTRES)
		rows, err := r.Cluster.Usage(ctx, l, nil, usage.Hour, 0, r.watermark)
		if err != nil {
			t.Fatal(err)
		}
		exact := map[usage.Key]float64{}
		for _, u := range rows {
			exact[usage.Key{Assoc: u.Assoc, TRES: u.TRES}] += in.Bucket(u, usage.Hour)
		}
		tres := map[uint32]bool{}
		for k := range r.frozen.Usage {
			tres[k.TRES] = true
		}
		if allTRES != (len(tres) == 3) || !tres[TRESBilling] {
			t.Errorf("AllTRES %v: usage of TRES %v", allTRES, tres)
		}
		worst := 0.0
		for k, want := range exact {
			got := r.frozen.Usage[k]
			allowed := usage.CoarseTolerance*want + usage.CoarseFloor
			if math.Abs(got-want) > allowed+1e-9*want {
				t.Errorf("half-life %v, period %v: id_assoc %d: tiers %v, hour by hour %v", p.HalfLife, p.Period, k.Assoc, got, want)
			}
			worst = math.Max(worst, math.Abs(got-want)/allowed)
		}
		users := st.Associations * 9 / 10
		t.Logf("half-life %vs, period %vs: %d keys, worst error %.2g of what is allowed, %d of about %d users read again from hours", p.HalfLife, p.Period, len(exact), worst, r.Refined, users)
		if p.HalfLife > 0 && (r.Refined < users/20 || r.Refined > users/4) {
			t.Errorf("%d associations read again from hours: want the idle tenth of %d users and a few quiet ones, not none or all", r.Refined, users)
		}
		if p.HalfLife == 0 && (r.Refined != 0 || worst > 1e-6) {
			t.Errorf("no decay: %d read again, worst error %g: want 0 and exact", r.Refined, worst)
		}
	}

	// PurgeUsageAfter=60days: hours older than that are gone, days stand
	// in for them (rows spread evenly over each day either way).
	purged := usage.Day.Start(end.AddDate(0, 0, -60).Unix(), time.UTC)
	if _, err := root.ExecContext(ctx, "DELETE FROM `"+c.Name+"_assoc_usage_hour_table` WHERE time_start < ?", purged); err != nil {
		t.Fatal(err)
	}
	r, l, in := coldLoaded(fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 18, ChargeJobEnd: true}, false)
	want := map[usage.Key]float64{}
	hours, err := c.Usage(ctx, l, nil, usage.Hour, purged, r.watermark)
	if err != nil {
		t.Fatal(err)
	}
	days, err := c.Usage(ctx, l, nil, usage.Day, 0, purged)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range hours {
		want[usage.Key{Assoc: u.Assoc, TRES: u.TRES}] += in.Bucket(u, usage.Hour)
	}
	for _, u := range days {
		want[usage.Key{Assoc: u.Assoc, TRES: u.TRES}] += in.Bucket(u, usage.Day)
	}
	for k, w := range want {
		if got := r.frozen.Usage[k]; math.Abs(got-w) > usage.CoarseTolerance*w+usage.CoarseFloor {
			t.Errorf("hours purged before %v: id_assoc %d: %v, days then hours %v", time.Unix(purged, 0).UTC(), k.Assoc, got, w)
		}
	}
}
