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
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// reweighJob is a job of TestRefresherReweighs: its job_table row and what
// slurmctld charges it per second (unrounded billing × UsageFactor).
type reweighJob struct {
	inx, assoc, qos int
	start, end      int64 // end 0: running
	tres            string
	charged         float64
}

// TestRefresherReweighs: jobs with fractional billing and QOS
// UsageFactors 0 and 2 roll up hour by hour as slurmdbd rolls them (the
// billing truncated, no factor; on 24.11 the per-QOS split beside). Every
// incremental refresh, as the hours pass the re-read window and freeze,
// and between rollups, equals a full load; and each user's RawUsage is
// what slurmctld charged its jobs pass by pass (fairshare.Passes.JobUsage
// at the charged rate), to within the rows' spread over their hour, the
// scavenger's nothing: on the 23.11 layout from the jobs alone, on 24.11
// from the per-QOS split, and the two agree.
func TestRefresherReweighs(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	by := map[string]map[uint32]float64{}
	for _, rel := range releases[1:3] {
		by[rel.name] = refresherReweighs(t, srv, rel)
	}
	a, b := by[releases[1].name], by[releases[2].name]
	for id, v := range a {
		if math.Abs(v-b[id]) > 1e-6*math.Max(1, a[1]) {
			t.Errorf("id_assoc %d: %.3f from the jobs (23.11), %.3f from the per-QOS split (24.11)", id, v, b[id])
		}
	}
}

// refresherReweighs runs TestRefresherReweighs on rel, giving the last
// refresh's RawUsage by id_assoc.
func refresherReweighs(t *testing.T, srv *mariadbtest.Server, rel release) map[uint32]float64 {
	_, c, db := openRelease(t, srv, rel)
	qosTable := rel.layout.QOSUsage
	rules := &usage.BillingRules{Weights: map[string]map[string]float64{"cpu": {"cpu": 1, "mem": 0.25 / 1024}}}
	jobs := []reweighJob{
		{1, 10, 1, base + 600, base + 5*3600 + 100, "1=6,2=6144,4=1,5=7", 7.5},
		{2, 11, 2, base + 1000, 0, "1=4,2=4096,4=1,5=5", 0},
		{3, 10, 3, base + 2000, base + 2*3600 + 10, "1=12,2=6144,4=1,5=13", 27},
	}
	srv.MustSQL(fmt.Sprintf("SET SESSION sql_mode=''; USE %s; DELETE FROM v2411_assoc_usage_hour_table;"+
		" INSERT INTO qos_table (id, name, usage_factor) VALUES (2, 'scavenger', 0), (3, 'high', 2); %s", db, insertJobs("v2411", jobs)))
	passes := fairshare.Passes{HalfLife: 6 * 3600, Period: 300, Phase: 18, ChargeJobEnd: true}
	r := &Refresher{Cluster: c, Passes: passes, Location: time.UTC, Billing: rules}
	usage := map[uint32]float64{}
	for k := 3; k <= 12*3; k++ {
		// three refreshes an hour: the finished jobs' tails kept from the
		// first and decayed to the others
		h := k / 3
		if k%3 == 0 {
			srv.MustSQL(fmt.Sprintf("USE %s; %s", db, rollJobs("v2411", jobs, h, qosTable)))
		}
		at := time.Unix(int64(base+h*3600+900+k%3*1200), 0)
		got, err := r.Refresh(context.Background(), at)
		if err != nil {
			t.Fatal(err)
		}
		full, err := (&Refresher{Cluster: c, Passes: passes, Location: time.UTC, Billing: rules}).Refresh(context.Background(), at)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Problems) != 0 {
			t.Errorf("hour %d: problems %v", h, got.Problems)
		}
		for i, row := range got.Tree.Row {
			usage[got.Rows[row].ID] = got.Tree.Assocs[i].RawUsage
			// a cold load sums the hours on the server: the scavenger's
			// nothing is a difference of rounding there
			if g, w := got.Tree.Assocs[i].RawUsage, full.Tree.Assocs[i].RawUsage; math.Abs(g-w) > 1e-9*math.Max(1, full.Tree.Assocs[0].RawUsage) {
				t.Errorf("hour %d, %s/%s: incremental %v, full %v", h, got.Tree.Assocs[i].Account, got.Tree.Assocs[i].User, g, w)
			}
		}
		want := map[uint32]float64{}
		for _, j := range jobs {
			want[uint32(j.assoc)] += passes.JobUsage(float64(j.start), float64(j.end), float64(at.Unix()), j.charged)
		}
		if math.Abs(usage[10]-want[10]) > 0.005*want[10] || math.Abs(usage[11]) > 1e-6*want[10] {
			t.Errorf("hour %d: RawUsage of id_assoc 10 %.1f, 11 %.3g; slurmctld charged %.1f and 0", h, usage[10], usage[11], want[10])
		}
	}
	if r.FullLoads != 1 || r.Freezes < 6 {
		t.Errorf("%d full loads and %d freezes: want 1, and the hours frozen as they leave the re-read window", r.FullLoads, r.Freezes)
	}
	return usage
}

// insertJobs replaces the cluster's job_table rows with jobs', in
// partition cpu, submitted as they start, none a heterogeneous-job
// component (het_job_offset NO_VAL).
func insertJobs(cluster string, jobs []reweighJob) string {
	var vals []string
	for _, j := range jobs {
		vals = append(vals, fmt.Sprintf("(%d,%d,%d,%d,'cpu',%d,%d,%d,'%s',4294967294,0)", j.inx, j.inx, j.assoc, j.qos, j.start, j.start, j.end, j.tres))
	}
	return fmt.Sprintf("DELETE FROM %[1]s_job_table; INSERT INTO %[1]s_job_table (id_job, job_db_inx, id_assoc, id_qos, `partition`, time_submit, time_start, time_end, tres_alloc, het_job_offset, deleted) VALUES ", cluster) +
		strings.Join(vals, ",") + ";"
}

// rollJobs is what slurmdbd's hourly rollup of the cluster writes for
// jobs up to hour h after base: each hour's billing row holds the
// recorded (truncated) billing times the jobs' seconds in it, no
// UsageFactor, stamped a minute after the hour, and with qosTable the
// same split by QOS (id_alt); last_ran moves to the hour's end.
func rollJobs(cluster string, jobs []reweighJob, hours int, qosTable bool) string {
	sums, byQOS := map[[2]int64]float64{}, map[[3]int64]float64{}
	for _, j := range jobs {
		rec, _, _ := usage.TRESCount(j.tres, usage.TRESBilling)
		for k := int64(0); k < int64(hours); k++ {
			h := base + k*3600
			end := h + 3600
			if j.end != 0 {
				end = min(end, j.end)
			}
			if secs := end - max(h, j.start); secs > 0 {
				sums[[2]int64{int64(j.assoc), h}] += float64(rec) * float64(secs)
				byQOS[[3]int64{int64(j.assoc), int64(j.qos), h}] += float64(rec) * float64(secs)
			}
		}
	}
	var vals []string
	for k, v := range sums {
		vals = append(vals, fmt.Sprintf("(%d,%d,0,%d,5,%d,%.0f)", k[1]+3660, k[1]+3660, k[0], k[1], v))
	}
	q := ""
	if qosTable {
		var qv []string
		for k, v := range byQOS {
			qv = append(qv, fmt.Sprintf("(%d,%d,0,%d,%d,5,%d,%.0f)", k[2]+3660, k[2]+3660, k[0], k[1], k[2], v))
		}
		q = "REPLACE INTO " + cluster + "_qos_usage_hour_table (creation_time, mod_time, deleted, id, id_alt, id_tres, time_start, alloc_secs) VALUES " + strings.Join(qv, ",") + "; "
	}
	return q + fmt.Sprintf("REPLACE INTO %[1]s_assoc_usage_hour_table (creation_time, mod_time, deleted, id, id_tres, time_start, alloc_secs) VALUES %[2]s; UPDATE %[1]s_last_ran_table SET hourly_rollup = %[3]d",
		cluster, strings.Join(vals, ","), base+hours*3600)
}

// TestPurgedJobsReported: a full load that reweighs says when rolled-up
// hours that still weigh have no jobs left to reweigh them (PurgeJobAfter
// removed them), and says nothing while their jobs are there.
func TestPurgedJobsReported(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	gone := reweighJob{1, 10, 2, base + 600, base + 3000, "1=4,5=4", 0}
	later := reweighJob{2, 11, 1, base + 5*3600, base + 6*3600, "1=4,5=4", 4}
	passes := fairshare.Passes{HalfLife: 86400, Period: 300, Phase: 18, ChargeJobEnd: true}
	for _, kept := range [][]reweighJob{{later}, {gone, later}} {
		_, c, db := openRelease(t, srv, releases[1])
		srv.MustSQL(fmt.Sprintf("SET SESSION sql_mode=''; USE %s; DELETE FROM v2411_assoc_usage_hour_table;"+
			" INSERT INTO qos_table (id, name, usage_factor) VALUES (2, 'scavenger', 0); %s %s", db, insertJobs("v2411", kept), rollJobs("v2411", []reweighJob{gone, later}, 8, false)))
		snap, err := (&Refresher{Cluster: c, Passes: passes, Location: time.UTC}).Refresh(context.Background(), time.Unix(base+86400, 0))
		if err != nil {
			t.Fatal(err)
		}
		purged := false
		for _, p := range snap.Problems {
			purged = purged || strings.Contains(p.Error(), "PurgeJobAfter")
		}
		if want := len(kept) == 1; purged != want {
			t.Errorf("%d of the 2 jobs kept: purged jobs reported %v, want %v (%v)", len(kept), purged, want, snap.Problems)
		}
	}
}
