package gen_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// TestRollupsAreTheJobs: every second the generated hour rows hold is a
// second of a job of their association in that hour, times what the job
// allocates of the row's TRES, as slurmdbd's hourly rollup computes it;
// every second the jobs ran up to End is in the rows; days and months are
// the sums of their hours. The expected rows are computed here from
// job_table alone, job by job against each hour row, and the generated
// history must still have the shape the generator promises, so that an
// empty one does not pass.
func TestRollupsAreTheJobs(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	for i, c := range []gen.Config{
		{Associations: 300, Depth: 4, Months: 2, Seed: 7, JobsPerHour: 20, AllTRES: true},
		{Associations: 200, Depth: 3, Months: 1, Seed: 8, JobsPerHour: 60},
		{Associations: 200, Depth: 3, Months: 1, Seed: 9, JobsPerHour: 40, AllTRES: true, Site: true},
	} {
		t.Run(fmt.Sprintf("AllTRES=%v,Site=%v", c.AllTRES, c.Site), func(t *testing.T) {
			db := fmt.Sprintf("gen%d", i)
			srv.Load(db, "../../testdata/slurm-22.05/slurm_acct_db.sql.gz")
			root, err := sql.Open("mysql", srv.DSN("root", "", db))
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			rollupsAreTheJobs(t, root, c)
		})
	}
}

func rollupsAreTheJobs(t *testing.T, db *sql.DB, c gen.Config) {
	ctx := context.Background()
	if err := db.QueryRowContext(ctx, "SELECT name FROM cluster_table LIMIT 1").Scan(&c.Cluster); err != nil {
		t.Fatal(err)
	}
	// mid-month, so that both ends cut a month and a day
	c.End = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	st, err := gen.Fill(ctx, db, c)
	if err != nil {
		t.Fatal(err)
	}
	end := c.End.Unix()
	rolled := map[int]bool{5: true} // billing
	if c.AllTRES {
		rolled[1], rolled[4] = true, true // cpu, node
	}
	if c.AllTRES && c.Site {
		rolled[2] = true // mem
	}
	tbl := func(s string) string { return "`" + c.Cluster + "_" + s + "`" }
	query := func(q string, scan func(*sql.Rows) error) {
		t.Helper()
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}

	type job struct {
		start, end int64 // end: End for a job still running
		alloc      map[int]int64
	}
	jobs := map[int][]job{}
	query("SELECT id_assoc, time_start, time_end, tres_alloc FROM "+tbl("job_table")+" WHERE deleted = 0", func(r *sql.Rows) error {
		var id int
		var j job
		var tres string
		if err := r.Scan(&id, &j.start, &j.end, &tres); err != nil {
			return err
		}
		if j.end == 0 {
			j.end = end
		}
		j.alloc = map[int]int64{}
		for _, kv := range strings.Split(tres, ",") {
			k, v, _ := strings.Cut(kv, "=")
			tid, err1 := strconv.Atoi(k)
			n, err2 := strconv.ParseInt(v, 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("job of id_assoc %d: tres_alloc %q", id, tres)
			}
			j.alloc[tid] = n
		}
		jobs[id] = append(jobs[id], j)
		return nil
	})
	// overlap is how many seconds of [a, b) j ran, before End
	overlap := func(j job, a, b int64) int64 {
		return max(0, min(j.end, b, end)-max(j.start, a))
	}

	type key struct {
		id, tres int
		start    int64
	}
	type assocTRES struct{ id, tres int }
	read := func(table string) map[key]int64 {
		rows := map[key]int64{}
		query("SELECT id, id_tres, time_start, alloc_secs FROM "+tbl(table), func(r *sql.Rows) error {
			var k key
			var secs int64
			if err := r.Scan(&k.id, &k.tres, &k.start, &secs); err != nil {
				return err
			}
			if !rolled[k.tres] {
				return fmt.Errorf("%s: a row of TRES %d, which the rollups do not hold", table, k.tres)
			}
			rows[k] = secs
			return nil
		})
		return rows
	}
	hours := read("assoc_usage_hour_table")
	rowSecs := map[assocTRES]int64{}
	for k, secs := range hours {
		var want int64
		for _, j := range jobs[k.id] {
			want += overlap(j, k.start, k.start+3600) * j.alloc[k.tres]
		}
		if secs != want {
			t.Errorf("id_assoc %d, TRES %d, hour %v: alloc_secs %d, its jobs ran %d", k.id, k.tres, time.Unix(k.start, 0).UTC(), secs, want)
		}
		rowSecs[assocTRES{k.id, k.tres}] += secs
	}
	// with every row its jobs' seconds, equal totals leave no second of a
	// job in an hour without a row
	jobSecs := map[assocTRES]int64{}
	for id, js := range jobs {
		for _, j := range js {
			for tres, n := range j.alloc {
				if rolled[tres] {
					jobSecs[assocTRES{id, tres}] += overlap(j, j.start, end) * n
				}
			}
		}
	}
	for k, secs := range jobSecs {
		if secs != rowSecs[k] {
			t.Errorf("id_assoc %d, TRES %d: the jobs ran %d before End, the hour rows hold %d", k.id, k.tres, secs, rowSecs[k])
		}
	}

	for _, p := range []struct {
		table string
		start func(time.Time) time.Time
	}{
		{"assoc_usage_day_table", func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC) }},
		{"assoc_usage_month_table", func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC) }},
	} {
		want := map[key]int64{}
		for k, secs := range hours {
			want[key{k.id, k.tres, p.start(time.Unix(k.start, 0).UTC()).Unix()}] += secs
		}
		got := read(p.table)
		for k, secs := range want {
			if got[k] != secs {
				t.Errorf("%s: id_assoc %d, TRES %d, %v: alloc_secs %d, its hours %d", p.table, k.id, k.tres, time.Unix(k.start, 0).UTC(), got[k], secs)
			}
		}
		for k, secs := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: id_assoc %d, TRES %d, %v: alloc_secs %d without hours", p.table, k.id, k.tres, time.Unix(k.start, 0).UTC(), secs)
			}
		}
	}

	// The shape: JobsPerHour finished jobs an hour and about one user in
	// ten active in an hour.
	span := float64(end - c.End.AddDate(0, -c.Months, 0).Unix())
	var users int
	query("SELECT COUNT(*) FROM "+tbl("assoc_table")+" WHERE user != ''", func(r *sql.Rows) error { return r.Scan(&users) })
	perHour := float64(st.Jobs) / span * 3600
	active := float64(st.HourRows/len(rolled)) / (span / 3600 * float64(users))
	t.Logf("%+v: %.1f finished jobs an hour, %.3f of the user-hours active", st, perHour, active)
	if perHour < 0.8*float64(c.JobsPerHour) || perHour > 1.2*float64(c.JobsPerHour) {
		t.Errorf("%.1f finished jobs an hour, want about %d", perHour, c.JobsPerHour)
	}
	if active < 0.05 || active > 0.2 {
		t.Errorf("%.3f of the user-hours active, want about one in ten", active)
	}
	if st.RunningJobs == 0 {
		t.Error("no running jobs")
	}
}
