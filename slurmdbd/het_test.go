package slurmdbd

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// hetJobs are TestHetSubmitCharge's jobs: an ordinary one, and three
// heterogeneous-job components (A+0; B+0 and B+1, B+0 still running),
// two of them at UsageFactor 2; charged is billing × UsageFactor. B+1
// ends as an hour does: at that hour's rollup it is no job after the
// rollup, and one of those that ended up to it (Cluster.Ended's (from,
// to]), or its charge at submission would be missing for an hour.
var hetJobs = []reweighJob{
	{1, 10, 1, base + 600, base + 5*3600 + 100, "1=6,4=1,5=7", 7},
	{2, 10, 3, base + 1000, base + 3*3600 + 10, "1=2,4=1,5=3", 6},
	{3, 11, 1, base + 3*3600 + 300, 0, "1=17,4=1,5=17", 17},
	{4, 11, 3, base + 3*3600 + 300, base + 6*3600, "1=2,4=1,5=2", 4},
	{5, 11, 1, base + 4*3600 + 100, base + 7*3600 + 50, "1=3,4=1,5=3", 3},
}

// hetSubmit is the components' time_submit by job_db_inx: 8 s after a
// pass of hetPasses (phase 18, every 300 s), as alice's was on the
// site-shaped 26.05 cluster; hetOffset their het_job_offset. Job 5 is the
// record of a requeued run of a component (restart_cnt 1), which
// slurmctld does not charge at its time_submit.
var (
	hetSubmit  = map[int]int64{2: base + 926, 3: base + 10826, 4: base + 10826, 5: base + 14426}
	hetOffset  = map[int]int{2: 0, 3: 0, 4: 1, 5: 0}
	hetRestart = map[int]int{5: 1}
)

// hetCharged is the moment slurmctld charged a job at submission, ok
// false for a job it did not.
func hetCharged(inx int) (s int64, ok bool) {
	s, ok = hetSubmit[inx]
	return s, ok && hetRestart[inx] == 0
}

var hetPasses = fairshare.Passes{HalfLife: 6 * 3600, Period: 300, Phase: 18, ChargeJobEnd: true}

// TestHetSubmitCharge: on the 26.05 layout (sluid) with limits enforced,
// the heterogeneous-job components, and they alone (not a requeued run's
// record), are read with their time_submit as SubmitCharge; on 24.11 and
// 25.11 none is. Rolled up hour
// by hour until the finished ones freeze, every incremental refresh equals
// a full load, and each user's RawUsage exceeds that of the same jobs
// recorded as ordinary ones by what slurmctld 26.05 charged the
// components at submission, computed here from the passes alone: per
// component charged × Δ × d^Δ (Δ = S − g, g the pass before S) times
// d^(the last pass before the refresh − g); on 24.11 and 25.11 by nothing.
func TestHetSubmitCharge(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	d := 1 - 0.693/hetPasses.HalfLife
	for _, rel := range releases[2:5] {
		t.Run(rel.name, func(t *testing.T) {
			charges := rel.layout.HetChargedAtSubmit
			marked, plain := hetRefreshes(t, srv, rel, true), hetRefreshes(t, srv, rel, false)
			for h := range marked {
				at := float64(base + (h+1)*3600 + 900)
				lastPass := hetPasses.Phase + math.Floor((at-hetPasses.Phase)/hetPasses.Period)*hetPasses.Period
				want := map[uint32]float64{}
				for _, j := range hetJobs {
					s, ok := hetCharged(j.inx)
					if !ok || !charges || float64(s) > at {
						continue
					}
					g := hetPasses.Phase + math.Floor((float64(s)-hetPasses.Phase)/hetPasses.Period)*hetPasses.Period
					delta := float64(s) - g
					want[uint32(j.assoc)] += j.charged * delta * math.Pow(d, delta) * math.Pow(d, lastPass-g)
				}
				for _, id := range []uint32{10, 11} {
					if got := marked[h][id] - plain[h][id]; math.Abs(got-want[id]) > 1e-6*math.Max(1, want[id]) {
						t.Errorf("hour %d, id_assoc %d: charged at submission %.4f, slurmctld %.4f", h+1, id, got, want[id])
					}
				}
			}
		})
	}
}

// hetRefreshes rolls hetJobs up hour by hour on rel, refreshing
// incrementally and fully a quarter past each hour, and gives each
// hour's RawUsage by id_assoc. marked records the components as such
// (het_job_offset, time_submit, restart_cnt); otherwise every job is
// ordinary.
func hetRefreshes(t *testing.T, srv *mariadbtest.Server, rel release, marked bool) []map[uint32]float64 {
	t.Helper()
	_, c, db := openRelease(t, srv, rel)
	mark := ""
	if marked {
		for inx, s := range hetSubmit {
			mark += fmt.Sprintf(" UPDATE %s_job_table SET het_job_offset = %d, time_submit = %d, restart_cnt = %d WHERE job_db_inx = %d;", c.Name, hetOffset[inx], s, hetRestart[inx], inx)
		}
	}
	srv.MustSQL(fmt.Sprintf("SET SESSION sql_mode=''; USE %s; DELETE FROM %s_assoc_usage_hour_table;"+
		" INSERT INTO qos_table (id, name, usage_factor) VALUES (2, 'scavenger', 0), (3, 'high', 2); %s%s", db, c.Name, insertJobs(c.Name, hetJobs), mark))
	r := &Refresher{Cluster: c, Passes: hetPasses, Location: time.UTC}
	var out []map[uint32]float64
	for h := 1; h <= 11; h++ {
		srv.MustSQL(fmt.Sprintf("USE %s; %s", db, rollJobs(c.Name, hetJobs, h, rel.layout.QOSUsage)))
		at := time.Unix(int64(base+h*3600+900), 0)
		got := matchesFullLoad(t, r, at)
		if len(got.Problems) != 0 {
			t.Errorf("hour %d: problems %v", h, got.Problems)
		}
		for _, j := range got.Jobs {
			want := int64(0)
			if s, ok := hetCharged(int(j.Inx)); ok && marked && rel.layout.HetChargedAtSubmit {
				want = s
			}
			if j.SubmitCharge != want {
				t.Errorf("hour %d, job_db_inx %d: SubmitCharge %d, want %d", h, j.Inx, j.SubmitCharge, want)
			}
		}
		raw := map[uint32]float64{}
		for i, row := range got.Tree.Row {
			raw[got.Rows[row].ID] = got.Tree.Assocs[i].RawUsage
		}
		out = append(out, raw)
	}
	if r.FullLoads != 1 || r.Freezes < 5 {
		t.Errorf("%d full loads and %d freezes: want 1, and the hours frozen as they leave the re-read window", r.FullLoads, r.Freezes)
	}
	return out
}

// TestHetSubmitChargeNeedsLimits: without limits enforced slurmctld
// 26.05 charges no component at submission (acct_policy_job_fini returns
// before priority_p_job_end): none is read with a SubmitCharge.
func TestHetSubmitChargeNeedsLimits(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	_, c, db := openRelease(t, srv, releases[4])
	srv.MustSQL(fmt.Sprintf("SET SESSION sql_mode=''; USE %s; %s UPDATE %s_job_table SET het_job_offset = 0, time_submit = %d;",
		db, insertJobs(c.Name, hetJobs), c.Name, base+926))
	ctx := context.Background()
	for _, charged := range []bool{false, true} {
		jobs, err := c.Jobs(ctx, 0, 1<<40, charged)
		if err != nil || len(jobs) != len(hetJobs) {
			t.Fatalf("%d jobs, %v", len(jobs), err)
		}
		for _, j := range jobs {
			if want := map[bool]int64{true: base + 926}[charged]; j.SubmitCharge != want {
				t.Errorf("charged %v: job_db_inx %d SubmitCharge %d, want %d", charged, j.Inx, j.SubmitCharge, want)
			}
		}
	}
	passes := hetPasses
	passes.ChargeJobEnd = false
	snap, err := (&Refresher{Cluster: c, Passes: passes, Location: time.UTC}).Refresh(ctx, time.Unix(base+3600, 0))
	if err != nil {
		t.Fatal(err)
	}
	var charged []string
	for _, j := range snap.Jobs {
		if j.SubmitCharge != 0 {
			charged = append(charged, fmt.Sprint(j.Inx))
		}
	}
	if len(snap.Jobs) == 0 || len(charged) > 0 {
		t.Errorf("%d jobs read; charged at submission without limits: %s", len(snap.Jobs), strings.Join(charged, ", "))
	}
}
