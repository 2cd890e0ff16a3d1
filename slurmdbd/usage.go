package slurmdbd

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TRESBilling is the id of the billing TRES (tres_table static ids:
// cpu=1, mem=2, energy=3, node=4, billing=5), fairshare's input.
const TRESBilling = usage.TRESBilling

// LastRan is <cluster>_last_ran_table: the end of the last rolled-up hour,
// day and month (unix seconds). OK is false before a cluster's first
// rollup, when the table is empty.
type LastRan struct {
	Hourly, Daily, Monthly int64
	OK                     bool
}

const sqlLastRan = "SELECT `hourly_rollup`, `daily_rollup`, `monthly_rollup` FROM `%[1]s_last_ran_table` LIMIT 1"

// LastRan reads when slurmdbd last rolled usage up.
func (c Cluster) LastRan(ctx context.Context) (LastRan, error) {
	var l LastRan
	err := c.db.query(ctx, "reading "+c.tableName("last_ran_table"), c.fill(sqlLastRan), func(r *sql.Rows) error {
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
	l.Hourly = min(usage.Hour.Start(l.Hourly, loc), usage.Hour.Start(t, loc))
	l.Daily = min(usage.Day.Start(l.Daily, loc), usage.Day.Start(t, loc))
	l.Monthly = min(usage.Month.Start(l.Monthly, loc), usage.Month.Start(t, loc))
	return l
}

// QOS is a row of qos_table.
type QOS struct {
	ID          uint32
	Name        string
	UsageFactor float64
	Priority    uint32
}

const sqlQOS = "SELECT `id`, `name`, `usage_factor`, `priority` FROM `qos_table` WHERE `deleted` = 0"

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

// usageFactors is the QOS UsageFactor by id, as usage takes them.
func usageFactors(qos map[uint32]QOS) map[uint32]float64 {
	out := make(map[uint32]float64, len(qos))
	for id, q := range qos {
		out[id] = q.UsageFactor
	}
	return out
}

func anyFactor(qos map[uint32]QOS) bool {
	for _, q := range qos {
		if q.UsageFactor != 1 {
			return true
		}
	}
	return false
}

// rollupTable is the name part of a period's rollup tables: hour, day or
// month.
func rollupTable(p usage.Period) (string, error) {
	switch p {
	case usage.Hour, usage.Day, usage.Month:
		return string(p), nil
	}
	return "", fmt.Errorf("rollup period %q: expected hour, day or month", p)
}

// The rows of a rollup table of period %[2]s (rollupTable) and TRES
// condition %[3]s (tresCond) with from <= time_start < to, then %[4]s: a
// further condition on the association table's rows, or nothing. The
// per-QOS table (24.11+) has the QOS in id_alt.
const (
	sqlAssocUsage = "SELECT `id`, 0, `id_tres`, `time_start`, `alloc_secs` FROM `%[1]s_assoc_usage_%[2]s_table` WHERE %[3]s AND `time_start` >= ? AND `time_start` < ?%[4]s"
	sqlQOSUsage   = "SELECT `id`, `id_alt`, `id_tres`, `time_start`, `alloc_secs` FROM `%[1]s_qos_usage_%[2]s_table` WHERE %[3]s AND `time_start` >= ? AND `time_start` < ?"
)

// Usage reads alloc_secs of billing (with AllTRES every TRES but energy) from
// <cluster>_assoc_usage_<period>_table with from <= time_start < to. The
// rollups do not apply QOS UsageFactor; where the layout has the 24.11+
// <cluster>_qos_usage_<period>_table and some QOS has a factor other than
// 1, rows with a per-QOS split there are weighted by it.
func (c Cluster) Usage(ctx context.Context, l Layout, qos map[uint32]QOS, p usage.Period, from, to int64) ([]usage.Row, error) {
	period, err := rollupTable(p)
	if err != nil {
		return nil, err
	}
	extra := ""
	if p == usage.Hour && l.hoursByModTime() {
		// the same rows, found by index
		extra = " AND `mod_time` >= " + strconv.FormatInt(from, 10)
	}
	cond, _ := c.tresCond()
	rows, err := c.usage(ctx, "assoc_usage_"+period+"_table", c.fill(sqlAssocUsage, period, cond, extra), from, to)
	if err != nil {
		return nil, err
	}
	out := make([]usage.Row, len(rows))
	for i, u := range rows {
		out[i] = u.Row
	}
	if !l.QOSUsage || !anyFactor(qos) {
		return out, nil
	}
	split, err := c.usage(ctx, "qos_usage_"+period+"_table", c.fill(sqlQOSUsage, period, cond), from, to)
	if err != nil {
		return nil, err
	}
	usage.WeighByQOS(out, split, usageFactors(qos))
	return out, nil
}

// usage reads the rows of a rollup table (suffix, for messages) with
// query q of sqlAssocUsage or sqlQOSUsage.
func (c Cluster) usage(ctx context.Context, suffix, q string, from, to int64) ([]usage.QOSRow, error) {
	_, tres := c.tresCond()
	var out []usage.QOSRow
	err := c.db.query(ctx, "reading "+c.quoted(suffix), q, func(r *sql.Rows) error {
		var u usage.QOSRow
		if err := r.Scan(&u.Assoc, &u.QOS, &u.TRES, &u.Start, &u.AllocSecs); err != nil {
			return err
		}
		out = append(out, u)
		return nil
	}, tres, from, to)
	return out, err
}

// The earliest time_start of a rollup table of period %[2]s
// (rollupTable), and of the hour table by mod_time (an hour is rolled up
// after it ends).
const (
	sqlOldest      = "SELECT MIN(`time_start`) FROM `%[1]s_assoc_usage_%[2]s_table`"
	sqlOldestByMod = "SELECT CAST(MIN(`mod_time`) AS SIGNED) - 3600 FROM `%[1]s_assoc_usage_hour_table`"
)

// Oldest is the earliest time_start of a rollup table (ok false if empty):
// PurgeUsageAfter may have removed the oldest hours. It must not scan the
// table: 22.05's hours are indexed by time_start, 24.11+'s by mod_time.
func (c Cluster) Oldest(ctx context.Context, l Layout, p usage.Period) (start int64, ok bool, err error) {
	period, err := rollupTable(p)
	if err != nil {
		return 0, false, err
	}
	q := c.fill(sqlOldest, period)
	if p == usage.Hour && l.hoursByModTime() {
		q = c.fill(sqlOldestByMod)
	}
	var v sql.NullInt64
	err = c.db.query(ctx, "reading "+c.quoted("assoc_usage_"+period+"_table"), q, func(r *sql.Rows) error {
		return r.Scan(&v)
	})
	return v.Int64, v.Valid, err
}

const sqlTRES = "SELECT `id`, `type`, `name` FROM `tres_table` WHERE `deleted` = 0"

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

// The job_table columns usage.Job holds (scanJob), %[2]s the one of
// SubmitCharge (submitCharge), and the jobs that ran at some time in
// (from, to]: started before to, not ended by from (args to, from).
const (
	sqlJobCols = "`job_db_inx`, `id_job`, `partition`, `id_assoc`, `id_qos`, `time_start`, `time_end`, `tres_alloc`, %[2]s"
	sqlJobsRan = " WHERE `deleted` = 0 AND `time_start` > 0 AND `time_start` < ? AND (`time_end` = 0 OR `time_end` > ?)"
	sqlJobs    = "SELECT " + sqlJobCols + " FROM `%[1]s_job_table`" + sqlJobsRan
	// sqlEnded: the jobs that ended in (from, to], all of whose seconds
	// are before to (the jobs above end after it); sqlEndedHet: the
	// heterogeneous-job components among them.
	sqlEnded    = "SELECT " + sqlJobCols + " FROM `%[1]s_job_table` WHERE `deleted` = 0 AND `time_start` > 0 AND `time_end` > ? AND `time_end` <= ?"
	sqlEndedHet = sqlEnded + " AND `het_job_offset` <> 4294967294"
)

// submitCharge is the column of sqlJobCols that gives usage.Job's
// SubmitCharge: with charged (Layout.HetChargedAtSubmit and limits
// enforced), time_submit where het_job_offset says the job is a
// heterogeneous-job component (NO_VAL: it is not), else the stand-in 0.
// Not for the record of a requeued run (restart_cnt, 24.11+): slurmctld
// gives it a new time_submit itself (job_mgr.c, the requeue), where only
// the submission RPCs charge (proc_req.c _het_job_val_rem).
func submitCharge(charged bool) string {
	if charged {
		return "IF(`het_job_offset` = 4294967294 OR `restart_cnt` > 0, 0, `time_submit`)"
	}
	return "0"
}

// Jobs reads the jobs that ran at some time in (from, to]: started before
// to and not ended by from. charged: see submitCharge.
func (c Cluster) Jobs(ctx context.Context, from, to int64, charged bool) ([]usage.Job, error) {
	return c.jobs(ctx, c.fill(sqlJobs, submitCharge(charged)), to, from)
}

// Ended reads the jobs that ended in (from, to]. charged: see
// submitCharge.
func (c Cluster) Ended(ctx context.Context, from, to int64, charged bool) ([]usage.Job, error) {
	return c.jobs(ctx, c.fill(sqlEnded, submitCharge(charged)), from, to)
}

// EndedHet reads the heterogeneous-job components that ended in (from,
// to]. charged: see submitCharge.
func (c Cluster) EndedHet(ctx context.Context, from, to int64, charged bool) ([]usage.Job, error) {
	return c.jobs(ctx, c.fill(sqlEndedHet, submitCharge(charged)), from, to)
}

func (c Cluster) jobs(ctx context.Context, q string, args ...any) ([]usage.Job, error) {
	var out []usage.Job
	err := c.db.query(ctx, "reading "+c.quoted("job_table"), q, func(r *sql.Rows) error {
		var j usage.Job
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
func scanJob(r *sql.Rows, j *usage.Job, extra ...any) error {
	var tres, part sql.NullString
	if err := r.Scan(append([]any{&j.Inx, &j.ID, &part, &j.Assoc, &j.QOS, &j.Start, &j.End, &tres, &j.SubmitCharge}, extra...)...); err != nil {
		return err
	}
	j.TRESAlloc, j.Partition = tres.String, part.String
	return nil
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
	err := c.billingHours(ctx, cur-int64(n-1)*ws, end.Unix()+1, func(u usage.Row) {
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
func (c Cluster) billingHours(ctx context.Context, from, to int64, add func(usage.Row)) error {
	l, err := c.Layout(ctx)
	if err != nil {
		return err
	}
	qos, err := c.db.QOS(ctx)
	if err != nil {
		return err
	}
	rows, err := c.Usage(ctx, l, qos, usage.Hour, from, to)
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
