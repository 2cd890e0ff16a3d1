package slurmdbd

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// PendingJob is a row of <cluster>_job_table for a job that was pending:
// what slurmctld recorded of it at submission and when it became eligible.
type PendingJob struct {
	ID        uint32
	ArrayJob  uint32 // id_array_job; 0 outside arrays
	ArrayTask string // the pending tasks of an array ("1-10"), or the task id
	Assoc     uint32
	QOS       uint32
	User      uint32
	Account   string
	// Partitions the job was submitted to (several: one priority each).
	Partitions []string
	// Submit and Eligible (begin time, 0 while not eligible) are unix
	// seconds.
	Submit, Eligible int64
	CPUs, Nodes      uint32
	// TimeLimit in minutes (INFINITE 0xffffffff; NO_VAL 0xfffffffe when
	// the job gave none).
	TimeLimit uint32
	// TRESReq is tres_req ("1=4,2=8000,4=1,5=4").
	TRESReq string
	// Priority is the priority slurmctld recorded last (0: held).
	Priority uint32
}

// The job_table columns PendingJob holds (pendingJobs); the jobs pending
// at a moment (args: it, three times): submitted by then, not started or
// ended by then, where the time_end condition lets the rollup2 index
// (time_end, time_eligible) skip the finished jobs; the rows of one job id.
const (
	sqlPending = "SELECT `id_job`, `id_array_job`, COALESCE(`array_task_str`, ''), `id_array_task`, `id_assoc`, `id_qos`, `id_user`, `account`, `partition`, " +
		"`time_submit`, `time_eligible`, `cpus_req`, `tres_req`, `timelimit`, `priority` FROM `%[1]s_job_table`"
	sqlPendingJobs = sqlPending + " WHERE `deleted` = 0 AND (`time_end` = 0 OR `time_end` > ?) AND `time_submit` <= ? AND (`time_start` = 0 OR `time_start` > ?)"
	sqlJobRows     = sqlPending + " WHERE `deleted` = 0 AND `id_job` = ? ORDER BY `time_submit`"
)

// PendingJobs reads the jobs pending at at: submitted by then, not
// started or ended by then.
func (c Cluster) PendingJobs(ctx context.Context, at time.Time) ([]PendingJob, error) {
	t := at.Unix()
	return c.pendingJobs(ctx, c.fill(sqlPendingJobs), t, t, t)
}

// Job reads the rows of one job id (several when it was requeued or is an
// array), oldest first.
func (c Cluster) Job(ctx context.Context, id uint32) ([]PendingJob, error) {
	return c.pendingJobs(ctx, c.fill(sqlJobRows), id)
}

func (c Cluster) pendingJobs(ctx context.Context, q string, args ...any) ([]PendingJob, error) {
	var out []PendingJob
	err := c.db.query(ctx, "reading pending jobs from "+c.quoted("job_table"), q, func(r *sql.Rows) error {
		var j PendingJob
		var task uint32
		var part string
		var tres sql.NullString
		if err := r.Scan(&j.ID, &j.ArrayJob, &j.ArrayTask, &task, &j.Assoc, &j.QOS, &j.User, &j.Account, &part,
			&j.Submit, &j.Eligible, &j.CPUs, &tres, &j.TimeLimit, &j.Priority); err != nil {
			return err
		}
		if j.ArrayTask == "" && task != noVal && task != infinite {
			j.ArrayTask = fmt.Sprint(task)
		}
		j.Partitions = splitComma(part)
		j.TRESReq = tres.String
		if n, ok, err := usage.TRESCount(j.TRESReq, TRESNode); err == nil && ok {
			j.Nodes = uint32(n)
		}
		out = append(out, j)
		return nil
	}, args...)
	return out, err
}

// Slurm's NO_VAL, which id_array_task holds outside arrays, and INFINITE
// for 32-bit values (slurm.h).
const noVal, infinite = 0xfffffffe, 0xffffffff

// TRESNode is the id of the node TRES (tres_table static ids).
const TRESNode = 4

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// sqlOldestJob is the start of the job that ended first of those
// job_table holds: PurgeJobAfter removes jobs by their end (the rollup2
// and archive_purge indexes lead with time_end).
const sqlOldestJob = "SELECT `time_start` FROM `%[1]s_job_table` WHERE `time_end` > 0 ORDER BY `time_end` LIMIT 1"

// OldestJob is the start of the finished job that ended first of those the
// table holds; ok is false when it holds none.
func (c Cluster) OldestJob(ctx context.Context) (start int64, ok bool, err error) {
	err = c.db.query(ctx, "reading the oldest job of "+c.quoted("job_table"), c.fill(sqlOldestJob), func(r *sql.Rows) error {
		ok = true
		return r.Scan(&start)
	})
	return start, ok, err
}

// sqlClusterTRES reads the cluster row of <cluster>_event_table (node_name
// empty) covering a moment (args: it, twice).
const sqlClusterTRES = "SELECT `tres` FROM `%[1]s_event_table` WHERE `node_name` = '' AND `time_start` <= ? AND (`time_end` = 0 OR `time_end` > ?) ORDER BY `time_start` DESC LIMIT 1"

// ClusterTRES is the cluster's TRES at at, by id: what slurmctld
// registered. ok is false when no row covers at.
func (c Cluster) ClusterTRES(ctx context.Context, at time.Time) (tres [][2]uint64, ok bool, err error) {
	table := c.quoted("event_table")
	t := at.Unix()
	var s string
	err = c.db.query(ctx, "reading the cluster's TRES from "+table, c.fill(sqlClusterTRES), func(r *sql.Rows) error {
		ok = true
		return r.Scan(&s)
	}, t, t)
	if err != nil || !ok {
		return nil, false, err
	}
	tres, err = usage.TRESCounts(s)
	if err != nil {
		return nil, false, fmt.Errorf("%s cluster row at %d: %w", table, t, err)
	}
	return tres, true, nil
}

// InheritedPriority is each row's association priority as slurmctld gets
// it from slurmdbd: its own, else its nearest ancestor's, else 0. rows
// are indexed like the slice given.
func InheritedPriority(rows []Assoc) []uint32 {
	accounts := map[string]int{}
	for i, a := range rows {
		if a.User == "" && !a.Deleted {
			accounts[a.Account] = i
		}
	}
	out := make([]uint32, len(rows))
	for i := range rows {
		a := &rows[i]
		for steps := 0; steps < 64; steps++ {
			if a.HasPriority {
				out[i] = a.Priority
				break
			}
			parent := a.ParentAccount
			if a.User != "" {
				parent = a.Account
			}
			j, ok := accounts[parent]
			if !ok || &rows[j] == a {
				break
			}
			a = &rows[j]
		}
	}
	return out
}
