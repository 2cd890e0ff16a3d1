package slurmdbd

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// TRESBilling is the id of the billing TRES (tres_table static ids:
// cpu=1, mem=2, energy=3, node=4, billing=5).
const TRESBilling = 5

// Finished jobs' uncharged tails depend on the moment of slurmctld's decay
// passes: where it is unknown, so are they. These sums bound that, kept
// like usage per id_assoc under ids no TRES has, so that they decay,
// freeze and are saved with it; the rebuild takes them out of its TRES
// (Usage.TailRisk):
//   - tresTailRate: Σ billing·d^(At−end), what a tail one second longer
//     or shorter moves;
//   - tresTailMost: Σ billing·min(PriorityCalcPeriod, duration)·d^(At−end),
//     the whole tail each job could have;
//   - tresTailLost: Σ billing·(its last interval)·d^(At−end) over the jobs
//     that ended within Passes.LockWait after a pass, which that pass may
//     have found ended and not charged (fairshare.Passes.LockWait).
const (
	tresTailRate = math.MaxUint32 - iota
	tresTailMost
	tresTailLost
)

// LastRan is <cluster>_last_ran_table: the end of the last rolled-up hour,
// day and month (unix seconds). OK is false before a cluster's first
// rollup, when the table is empty.
type LastRan struct {
	Hourly, Daily, Monthly int64
	OK                     bool
}

// LastRan reads when slurmdbd last rolled usage up.
func (c Cluster) LastRan(ctx context.Context) (LastRan, error) {
	var l LastRan
	q := "SELECT hourly_rollup, daily_rollup, monthly_rollup FROM " + c.table("last_ran_table") + " LIMIT 1"
	err := c.db.query(ctx, "reading "+c.Name+"_last_ran_table", q, func(r *sql.Rows) error {
		l.OK = true
		return r.Scan(&l.Hourly, &l.Daily, &l.Monthly)
	})
	return l, err
}

// asOf is the rollups as they stood at t, in zone loc: a period is rolled
// up only after it ends, so the rows and watermarks of later rollups must
// not count at a moment before them (check --at, explain --at).
//
// A last_ran inside a period counts from the period's start. slurmdbd
// writes one there in two cases: a new cluster's first event, and a
// late job record, which rewinds last_ran to the record's time
// (as_mysql_job.c, trigger_reroll; a restarted slurmctld sends them).
// Its next rollup starts from the period that time falls in. Until then
// that period's rows hold what the last rollup knew, all of the period,
// so they are not counted; the jobs are.
func (l LastRan) asOf(t int64, loc *time.Location) LastRan {
	l.Hourly = min(hourStart(l.Hourly, loc), hourStart(t, loc))
	l.Daily = min(startOf(l.Daily, loc, false), startOf(t, loc, false))
	l.Monthly = min(startOf(l.Monthly, loc, true), startOf(t, loc, true))
	return l
}

// QOS is a row of qos_table.
type QOS struct {
	ID          uint32
	Name        string
	UsageFactor float64
	Priority    uint32
}

const sqlQOS = "SELECT id, name, usage_factor, priority FROM `qos_table` WHERE deleted = 0"

// QOS reads the live QOS with their UsageFactor.
func (d *DB) QOS(ctx context.Context) (map[uint32]QOS, error) {
	out := map[uint32]QOS{}
	err := d.query(ctx, "reading qos_table", sqlQOS, func(r *sql.Rows) error {
		var q QOS
		var prio sql.NullInt64
		if err := r.Scan(&q.ID, &q.Name, &q.UsageFactor, &prio); err != nil {
			return err
		}
		if prio.Int64 > 0 && prio.Int64 < 0xfffffffe {
			q.Priority = uint32(prio.Int64)
		}
		out[q.ID] = q
		return nil
	})
	return out, err
}

// TRESEnergy is counted in joules, not TRES-seconds: slurmctld leaves it
// out of decayed usage and so does the exporter.
const TRESEnergy = 3

// UsageRow is one row of a rollup table: alloc_secs of one TRES.
type UsageRow struct {
	Assoc     uint32
	TRES      uint32
	Start     int64 // time_start
	AllocSecs float64
}

// Key is an association's usage of one TRES.
type Key struct {
	Assoc uint32
	TRES  uint32
}

// Period names a rollup table.
type Period string

const (
	Hour  Period = "hour"
	Day   Period = "day"
	Month Period = "month"
)

// Usage reads alloc_secs of billing (with AllTRES every TRES but energy) from
// <cluster>_assoc_usage_<period>_table with from <= time_start < to. The
// rollups do not apply QOS UsageFactor; where the layout has the 24.11+
// <cluster>_qos_usage_<period>_table and some QOS has a factor other than
// 1, rows with a per-QOS split there are weighted by it.
func (c Cluster) Usage(ctx context.Context, l Layout, qos map[uint32]QOS, p Period, from, to int64) ([]UsageRow, error) {
	extra := ""
	if p == Hour && l.hoursByModTime() {
		// the same rows, found by index
		extra = " AND mod_time >= " + strconv.FormatInt(from, 10)
	}
	rows, err := c.usage(ctx, "assoc_usage_"+string(p)+"_table", "0", from, to, extra)
	if err != nil {
		return nil, err
	}
	out := make([]UsageRow, len(rows))
	for i, u := range rows {
		out[i] = u.UsageRow
	}
	if !l.QOSUsage || !anyFactor(qos) {
		return out, nil
	}
	split, err := c.usage(ctx, "qos_usage_"+string(p)+"_table", "id_alt", from, to, "")
	if err != nil {
		return nil, err
	}
	type at struct {
		Key
		start int64
	}
	weighted := map[at]float64{}
	for _, u := range split {
		f := 1.0
		if q, ok := qos[u.qos]; ok && q.UsageFactor >= 0 {
			f = q.UsageFactor
		}
		weighted[at{Key{u.Assoc, u.TRES}, u.Start}] += u.AllocSecs * f
	}
	for i, u := range out {
		if v, ok := weighted[at{Key{u.Assoc, u.TRES}, u.Start}]; ok {
			out[i].AllocSecs = v
		}
	}
	return out, nil
}

func anyFactor(qos map[uint32]QOS) bool {
	for _, q := range qos {
		if q.UsageFactor != 1 {
			return true
		}
	}
	return false
}

type qosRow struct {
	UsageRow
	qos uint32
}

func (c Cluster) usage(ctx context.Context, suffix, qosCol string, from, to int64, extra string) ([]qosRow, error) {
	table := c.table(suffix)
	cond, tres := c.tresCond()
	q := "SELECT id, " + qosCol + ", id_tres, time_start, alloc_secs FROM " + table +
		" WHERE " + cond + " AND time_start >= ? AND time_start < ?" + extra
	var out []qosRow
	err := c.db.query(ctx, "reading "+table, q, func(r *sql.Rows) error {
		var u qosRow
		if err := r.Scan(&u.Assoc, &u.qos, &u.TRES, &u.Start, &u.AllocSecs); err != nil {
			return err
		}
		out = append(out, u)
		return nil
	}, tres, from, to)
	return out, err
}

// Oldest is the earliest time_start of a rollup table (ok false if empty):
// PurgeUsageAfter may have removed the oldest hours. It must not scan the
// table: 22.05's hours are indexed by time_start, 24.11+'s by mod_time.
func (c Cluster) Oldest(ctx context.Context, l Layout, p Period) (start int64, ok bool, err error) {
	table := c.table("assoc_usage_" + string(p) + "_table")
	q := "SELECT MIN(time_start) FROM " + table
	if p == Hour && l.hoursByModTime() {
		q = "SELECT CAST(MIN(mod_time) AS SIGNED) - 3600 FROM " + table
	}
	var v sql.NullInt64
	err = c.db.query(ctx, "reading "+table, q, func(r *sql.Rows) error {
		return r.Scan(&v)
	})
	return v.Int64, v.Valid, err
}

const sqlTRES = "SELECT id, type, name FROM `tres_table` WHERE deleted = 0"

// TRESNames names the TRES ids as Slurm prints them: type, or type/name
// (cpu, mem, billing, gres/gpu, license/matlab).
func (d *DB) TRESNames(ctx context.Context) (map[uint32]string, error) {
	out := map[uint32]string{}
	err := d.query(ctx, "reading tres_table", sqlTRES, func(r *sql.Rows) error {
		var id uint32
		var typ, name string
		if err := r.Scan(&id, &typ, &name); err != nil {
			return err
		}
		if name != "" {
			typ += "/" + name
		}
		out[id] = typ
		return nil
	})
	return out, err
}

// Job is what the exporter needs of a <cluster>_job_table row.
type Job struct {
	// Inx is job_db_inx: a uint64, since 24.11 generated with the cluster
	// id in its top 12 bits (above 2^63 on 25.11).
	Inx       uint64
	Assoc     uint32
	QOS       uint32
	Start     int64
	End       int64 // 0: running
	TRESAlloc string
}

// The job_table columns Job holds (scanJob), and the jobs that ran at some
// time in (from, to]: started before to, not ended by from (args to, from).
const (
	sqlJobCols = "job_db_inx, id_assoc, id_qos, time_start, time_end, tres_alloc"
	sqlJobsRan = " WHERE deleted = 0 AND time_start > 0 AND time_start < ? AND (time_end = 0 OR time_end > ?)"
)

// Jobs reads the jobs that ran at some time in (from, to]: started before
// to and not ended by from.
func (c Cluster) Jobs(ctx context.Context, from, to int64) ([]Job, error) {
	table := c.table("job_table")
	return c.jobs(ctx, table, "SELECT "+sqlJobCols+" FROM "+table+sqlJobsRan, to, from)
}

func (c Cluster) jobs(ctx context.Context, table, q string, args ...any) ([]Job, error) {
	var out []Job
	err := c.db.query(ctx, "reading "+table, q, func(r *sql.Rows) error {
		var j Job
		if err := scanJob(r, &j); err != nil {
			return err
		}
		out = append(out, j)
		return nil
	}, args...)
	return out, err
}

// scanJob reads a row of sqlJobCols into j, then any further columns into
// extra.
func scanJob(r *sql.Rows, j *Job, extra ...any) error {
	var tres sql.NullString
	if err := r.Scan(append([]any{&j.Inx, &j.Assoc, &j.QOS, &j.Start, &j.End, &tres}, extra...)...); err != nil {
		return err
	}
	j.TRESAlloc = tres.String
	return nil
}

// TRESCounts parses a TRES string ("1=4,2=16000,5=4") into id and count
// pairs; a malformed entry is an error naming it.
func TRESCounts(s string) ([][2]uint64, error) {
	var out [][2]uint64
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		k, v, found := strings.Cut(f, "=")
		id, err1 := strconv.ParseUint(k, 10, 32)
		n, err2 := strconv.ParseUint(v, 10, 64)
		if !found || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("TRES string %q: entry %q: expected id=count", s, f)
		}
		out = append(out, [2]uint64{id, n})
	}
	return out, nil
}

// TRESCount is the count of TRES id in a TRES string ("1=4,2=16000,5=4").
// ok is false when the id is absent. A malformed entry is an error naming
// it.
func TRESCount(s string, id int) (count uint64, ok bool, err error) {
	all, err := TRESCounts(s)
	if err != nil {
		return 0, false, err
	}
	for _, e := range all {
		if e[0] == uint64(id) {
			return e[1], true, nil
		}
	}
	return 0, false, nil
}

// WindowUsage sums rolled-up billing usage (QOS UsageFactor applied as in
// Usage) per association over n windows of length w, newest first: window
// 0 is the one holding end, windows start at multiples of w since the
// epoch. Only hours the hourly rollup has written count.
func (c Cluster) WindowUsage(ctx context.Context, end time.Time, w time.Duration, n int) (map[uint32][]float64, error) {
	ws := int64(w.Seconds())
	if ws <= 0 || n <= 0 {
		return nil, fmt.Errorf("usage windows of %v × %d: expected a positive length and count", w, n)
	}
	cur := end.Unix() / ws * ws
	out := map[uint32][]float64{}
	err := c.billingHours(ctx, cur-int64(n-1)*ws, end.Unix()+1, func(u UsageRow) {
		k := (cur - u.Start/ws*ws) / ws
		if k < 0 || k >= int64(n) {
			return
		}
		v := out[u.Assoc]
		if v == nil {
			v = make([]float64, n)
			out[u.Assoc] = v
		}
		v[k] += u.AllocSecs
	})
	return out, err
}

// billingHours calls add with each hourly rollup row of billing usage
// starting in [from, to), QOS UsageFactor applied as in Usage.
func (c Cluster) billingHours(ctx context.Context, from, to int64, add func(UsageRow)) error {
	l, err := c.Layout(ctx)
	if err != nil {
		return err
	}
	qos, err := c.db.QOS(ctx)
	if err != nil {
		return err
	}
	rows, err := c.Usage(ctx, l, qos, Hour, from, to)
	if err != nil {
		return err
	}
	for _, u := range rows {
		if u.TRES == TRESBilling {
			add(u)
		}
	}
	return nil
}

// Ended reads the jobs that ended in [from, to).
func (c Cluster) Ended(ctx context.Context, from, to int64) ([]Job, error) {
	table := c.table("job_table")
	q := "SELECT " + sqlJobCols + " FROM " + table + " WHERE deleted = 0 AND time_start > 0 AND time_end >= ? AND time_end < ?"
	return c.jobs(ctx, table, q, from, to)
}
