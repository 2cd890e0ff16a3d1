package slurmdbd

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TestRebuildAtMoment: usage rebuilt at a moment before the last rollup
// (check --at, explain --at) counts only what was recorded by then: the
// hour rows that ended by the moment and the jobs' seconds from the start
// of its hour to the moment, each decayed from its time to the moment.
// The reference here is summed independently, in plain SQL and Go, over a
// three-month generated cluster; a moment before any usage gives zero. At
// a one-hour half-life, a moment 43 days back (rows after it would weigh
// e^709 and more) gives usage, not an error. With the hours before the
// moment purged, the day rows stand in for them, and a problem says so.
// With last_ran rewound inside the last rolled hour, as slurmdbd does on
// a late job record, that hour counts from the jobs, not the rows too.
func TestRebuildAtMoment(t *testing.T) {
	ctx := context.Background()
	const months = 3
	g := generate(t, mariadbtest.Start(t, ""), "slurm-22.05", gen.Config{Associations: 300, Depth: 4, Months: months, Seed: 11, JobsPerHour: 20})
	first := genEnd.AddDate(0, -months, 0)
	week := fairshare.Passes{HalfLife: 7 * 86400, Period: 300, ChargeJobEnd: true}
	hour := fairshare.Passes{HalfLife: 3600, Period: 300, ChargeJobEnd: true}
	// compare checks root, the busiest account under it and the busiest
	// users (as many as users) against the reference (own usage per
	// id_assoc), to within tolerance, relative: the passes and the coarse tiers
	// (usage.CoarseTolerance) weigh a second a little differently from the
	// reference's d^(moment−t).
	compare := func(name string, p fairshare.Passes, at time.Time, ref map[uint32]float64, users int, tolerance float64) *Snapshot {
		t.Helper()
		snap, err := g.c.Snapshot(ctx, at, p, time.Time{}, time.UTC)
		if err != nil {
			t.Errorf("half-life %vs, %s (%v): %v", p.HalfLife, name, at, err)
			return nil
		}
		want := subtreeSums(snap, ref)
		var accounts, busy []int
		for i, a := range snap.Tree.Assocs {
			if a.Parent == 0 && !a.IsUser() {
				accounts = append(accounts, i)
			} else if a.IsUser() {
				busy = append(busy, i)
			}
		}
		busiest := func(s []int, n int) []int {
			slices.SortFunc(s, func(a, b int) int { return cmp.Compare(want[b], want[a]) })
			return s[:n]
		}
		for _, i := range slices.Concat([]int{0}, busiest(accounts, 1), busiest(busy, users)) {
			a, got := snap.Tree.Assocs[i], snap.Tree.Assocs[i].RawUsage
			t.Logf("half-life %vs, %s: account=%q user=%q: rebuilt %.4g, reference %.4g", p.HalfLife, name, a.Account, a.User, got, want[i])
			if math.IsNaN(got) || math.Abs(got-want[i]) > tolerance*want[i]+usage.CoarseFloor {
				t.Errorf("half-life %vs, %s (%v): account=%q user=%q: rebuilt usage %.6g, want %.6g (±%g)", p.HalfLife, name, at, a.Account, a.User, got, want[i], tolerance)
			}
		}
		return snap
	}
	for _, m := range []struct {
		name      string
		p         fairshare.Passes
		at        time.Time
		tolerance float64
	}{
		{"20 min before the last rollup", week, genEnd.Add(-20 * time.Minute), 2e-3},
		{"1 h before", week, genEnd.Add(-time.Hour), 2e-3},
		{"1 d 35 min before", week, genEnd.Add(-24*time.Hour - 35*time.Minute), 2e-3},
		{"7 d before", week, genEnd.AddDate(0, 0, -7), 2e-3},
		{"30 d 35 min before", week, genEnd.AddDate(0, 0, -30).Add(-35 * time.Minute), 2e-3},
		{"a day before any usage", week, first.AddDate(0, 0, -1), 0},
		// a second's weight differs by up to d^Period (6%) from the
		// reference's at this half-life
		{"43 d 35 min before", hour, genEnd.AddDate(0, 0, -43).Add(-35 * time.Minute), 0.1},
	} {
		compare(m.name, m.p, m.at, usageAt(t, g, m.p, m.at, m.at), 3, m.tolerance)
	}

	// PurgeUsageAfter=20days: the day holding the moment is counted from
	// its day row, spread evenly up to the moment's hour.
	at := genEnd.AddDate(0, 0, -30).Add(-35 * time.Minute)
	ref := usageAt(t, g, week, at, at)
	purged := usage.Day.Start(genEnd.AddDate(0, 0, -20).Unix(), time.UTC)
	if _, err := g.root.ExecContext(ctx, "DELETE FROM `"+g.c.Name+"_assoc_usage_hour_table` WHERE time_start < ?", purged); err != nil {
		t.Fatal(err)
	}
	if snap := compare("30 d 35 min before, hours purged before 20 d", week, at, ref, 0, 5e-3); snap != nil {
		said := false
		for _, p := range snap.Problems {
			said = said || strings.Contains(p.Error(), "PurgeUsageAfter")
			t.Log(p)
		}
		if !said {
			t.Errorf("hours purged past the moment: problems %v, want one naming the purge", snap.Problems)
		}
	}

	// A late job record (a restarted slurmctld sends some) makes slurmdbd
	// set last_ran to the record's time, inside the last rolled hour
	// (as_mysql_job.c); its next rollup redoes that hour. The hour's rows
	// hold all of it already: counted with the jobs after last_ran, a
	// soak restarting slurmctld across an hour had 72 s of its running
	// jobs twice. A 1-minute PriorityCalcPeriod keeps the passes within
	// 1.2% of the reference's continuous decay.
	rewound := genEnd.Add(-25 * time.Minute)
	if _, err := g.root.ExecContext(ctx, "UPDATE `"+g.c.Name+"_last_ran_table` SET hourly_rollup = ?, daily_rollup = ?, monthly_rollup = ?", rewound.Unix(), rewound.Unix(), rewound.Unix()); err != nil {
		t.Fatal(err)
	}
	minute := fairshare.Passes{HalfLife: 3600, Period: 60, ChargeJobEnd: true}
	at = genEnd.Add(5 * time.Minute)
	compare("5 min after the last rollup, last_ran rewound 35 min into its hour", minute, at, usageAt(t, g, minute, at, rewound), 3, 0.02)
}

// usageAt is the reference for TestRebuildAtMoment: billing usage per
// id_assoc at at, from the hour rows that ended by the hour of rolled and
// the jobs' seconds from that hour on (the hour rows after it are not
// rolled up yet at at, or are to be rolled again), each second decayed by
// d^(at−t).
func usageAt(t *testing.T, g generated, p fairshare.Passes, at, rolled time.Time) map[uint32]float64 {
	t.Helper()
	ctx := context.Background()
	d := p.D()
	T := float64(at.Unix())
	hour := float64(rolled.Unix() / 3600 * 3600) // UTC hours
	// decayed is ∫ d^(T−t) dt over [a, b)
	decayed := func(a, b float64) float64 {
		if b <= a {
			return 0
		}
		if d == 1 {
			return b - a
		}
		return (math.Pow(d, T-a) - math.Pow(d, T-b)) / math.Log(d)
	}
	own := map[uint32]float64{}
	rows, err := g.root.QueryContext(ctx, "SELECT id, time_start, alloc_secs FROM `"+g.c.Name+"_assoc_usage_hour_table` WHERE id_tres = ? AND time_start + 3600 <= ?", TRESBilling, hour)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uint32
		var start, secs float64
		if err := rows.Scan(&id, &start, &secs); err != nil {
			t.Fatal(err)
		}
		own[id] += secs / 3600 * decayed(start, start+3600)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err = g.root.QueryContext(ctx, "SELECT id_assoc, time_start, time_end, tres_alloc FROM `"+g.c.Name+"_job_table` WHERE deleted = 0 AND time_start > 0 AND time_start < ? AND (time_end = 0 OR time_end > ?)", T, hour)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uint32
		var start, end float64
		var tres string
		if err := rows.Scan(&id, &start, &end, &tres); err != nil {
			t.Fatal(err)
		}
		billing, _, err := usage.TRESCount(tres, TRESBilling)
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 || end > T {
			end = T
		}
		own[id] += float64(billing) * decayed(max(start, hour), end)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	return own
}

// subtreeSums is own usage per id_assoc summed up snap's tree.
func subtreeSums(snap *Snapshot, own map[uint32]float64) []float64 {
	sums := make([]float64, len(snap.Tree.Assocs))
	for i, r := range snap.Tree.Row {
		sums[i] = own[snap.Rows[r].ID]
	}
	for i := len(sums) - 1; i > 0; i-- {
		sums[snap.Tree.Assocs[i].Parent] += sums[i]
	}
	return sums
}
