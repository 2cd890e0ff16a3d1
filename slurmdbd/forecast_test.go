package slurmdbd

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// TestForecastInputs reads hand-made rows in the schema real slurmdbd
// 24.11 created; what each row must give is derived by hand beside it.
func TestForecastInputs(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	ctx := context.Background()
	_, c, db := openRelease(t, srv, releases[2])
	h := int64(1_800_000_000) / 3600 * 3600
	T := h + 1800
	sqlf := func(format string, args ...any) {
		// non-strict: the columns a row leaves out take their implicit defaults
		srv.MustSQL("SET SESSION sql_mode=''; USE " + db + "; " + fmt.Sprintf(format, args...))
	}
	sqlf(`DELETE FROM v2411_assoc_usage_hour_table; DELETE FROM v2411_qos_usage_hour_table; DELETE FROM v2411_job_table;
INSERT INTO qos_table (id, name, usage_factor) VALUES (2, 'half', 0.5);
INSERT INTO v2411_assoc_usage_hour_table (id, id_tres, time_start, alloc_secs, deleted) VALUES
 (10, 5, %[1]d, 3600, 0),
 (10, 1, %[1]d, 999, 0),
 (10, 5, %[2]d, 100, 1),
 (11, 5, %[3]d, 50, 0),
 (11, 5, %[4]d, 70, 0),
 (11, 5, %[2]d, 30, 0);
UPDATE v2411_assoc_usage_hour_table SET mod_time = time_start + 3660`, h, h+3600, h-3600, h+7200)
	// (mod_time: rolled up a minute after the hour, as slurmdbd does)
	// [h, h+2h): billing only (TRES 5; CPU's 999 is not billing), the row
	// marked deleted included (a removed association's usage stays in its
	// parent), the hour before and the hour at the end left out.
	got, err := c.BillingUsage(ctx, time.Unix(h, 0), time.Unix(h+7200, 0))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[uint32]float64{10: 3700, 11: 30}; !maps.Equal(got, want) {
		t.Errorf("BillingUsage over [h, h+2h): %v, want %v", got, want)
	}

	sqlf(`INSERT INTO v2411_job_table (id_job, job_db_inx, id_assoc, id_qos, time_start, time_end, tres_alloc, timelimit, deleted) VALUES
 (1, 1, 10, 1, %[1]d-600, 0, '1=4,5=10', 60, 0),
 (2, 2, 10, 2, %[1]d-60, 0, '1=8', 4294967295, 0),
 (3, 3, 11, 1, %[1]d, 0, '1=2,5=3', 4294967294, 0),
 (4, 4, 11, 1, %[1]d-100, %[1]d, '1=2', 10, 0),
 (5, 5, 11, 2, %[1]d-100, %[1]d+5, '1=2,5=6', 10, 0),
 (6, 6, 11, 1, %[1]d+1, 0, '1=2', 10, 0),
 (7, 7, 11, 1, %[1]d-100, 0, '1=2', 10, 1),
 (8, 8, 12, 1, %[1]d-100, 0, 'cpu=two', 10, 0),
 (9, 9, 12, 1, 0, 0, '1=2', 10, 0)`, T)
	jobs, problems, err := c.RunningJobs(ctx, time.Unix(T, 0))
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		billing  float64
		limitEnd int64
	}
	want := map[uint64]job{
		1: {10, T - 600 + 3600}, // billing 10, a 60-minute limit
		2: {4, 0},               // no billing: 8 CPUs × UsageFactor 0.5; INFINITE: no end
		3: {3, 0},               // started at T is running at T; NO_VAL: no end
		5: {3, T - 100 + 600},   // ends after T: billing 6 × 0.5
		// 4 ended at T, 6 starts after T, 7 is deleted, 8's TRES cannot be
		// read (a problem), 9 never started
	}
	gotJobs := map[uint64]job{}
	for _, j := range jobs {
		gotJobs[j.Inx] = job{j.Billing, j.LimitEnd}
	}
	if !maps.Equal(gotJobs, want) {
		t.Errorf("RunningJobs at T: %v, want %v", gotJobs, want)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "job_db_inx=8") {
		t.Errorf("problems %v, want one naming job_db_inx=8", problems)
	}
}
