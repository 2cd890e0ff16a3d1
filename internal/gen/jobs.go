package gen

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// job ran over [start, end) (end 0: still running) allocating alloc of
// allTRES.
type job struct {
	start, end int64
	alloc      [len(allTRES)]int64
	qos        int
	partition  string
}

// newJob allocates cpus CPUs on one node, billed by CPU, under QOS
// normal.
func newJob(start, end int64, cpus int) job {
	return job{start: start, end: end, alloc: [len(allTRES)]int64{int64(cpus), 0, 1, int64(cpus)}, qos: 1}
}

// site makes j a Site job: memory, the partition's billing truncated as
// slurmctld records it, and a QOS drawn from x in [0, 1).
func (j job) site(x float64) job {
	cpus := j.alloc[0]
	j.alloc[1] = cpus * siteMemPerCPU
	j.alloc[3] = int64(float64(cpus) * (1 + siteMemPerCPU*0.25/1024))
	j.partition = SitePartition
	switch {
	case x < 0.1:
		j.qos = siteHigh
	case x < 0.2:
		j.qos = siteScavenger
	}
	return j
}

// The QOS Site adds to qos_table, by id.
const (
	siteHigh      = 2
	siteScavenger = 3
)

// writeJobs writes the users' jobs, the rollups of their usage and
// last_ran_table, counting the rows in st.
func (c Config) writeJobs(ctx context.Context, db *sql.DB, tree *fairshare.Tree, st *Stats) error {
	var userIDs []int
	for i := 0; i < tree.Len(); i++ {
		if a := tree.Association(i); a.IsUser() {
			userIDs = append(userIDs, i+1)
		}
	}
	g := newJobGen(c, len(userIDs))
	for k, id := range userIDs {
		if err := g.user(ctx, db, k, id); err != nil {
			return err
		}
	}
	return g.finish(ctx, db, st)
}

// jobGen draws the users' jobs and writes them with their rollups.
//
// Each user alternates idle gaps and runs of jobs back to back, busy a
// tenth of the time. The lengths are exponential, which forget the
// past: busy at start one time in ten is already the steady state.
// Jobs last users/10/JobsPerHour hours, so that JobsPerHour end in an
// hour. A run touches about one hour more than it lasts: runs of at
// least minRunHours (more jobs back to back) keep the busy hours near a
// tenth when jobs are short.
type jobGen struct {
	c                 Config
	r                 *rand.Rand
	start, now        int64
	jobSecs, idleSecs float64
	another           float64 // a run's next job follows
	// one user in ten has been idle for the last two thirds of the span:
	// all its usage is old
	idleFrom int64
	jobID    int
	// Each table's rows are written in its primary key's order (id,
	// id_tres, time_start), one association after the other: in time
	// order every insert lands in another page, and at 100k associations
	// a year took hours instead of minutes.
	tables  map[string]*batch
	jobs    *batch
	active  []hourUse // the user's at hand
	running []assocJob
}

type assocJob struct {
	assoc int
	job
}

const minRunHours = 4

func newJobGen(c Config, users int) *jobGen {
	start, now := c.End.AddDate(0, -c.Months, 0).Unix(), c.End.Unix()
	jobHours := float64(users) / 10 / float64(c.JobsPerHour)
	runHours := max(jobHours, minRunHours)
	g := &jobGen{c: c, r: rand.New(rand.NewPCG(c.Seed, 0x6e6e)), start: start, now: now,
		jobSecs: jobHours * 3600, idleSecs: 9 * runHours * 3600, another: 1 - jobHours/runHours,
		idleFrom: start + (now-start)/3,
		tables:   map[string]*batch{}, jobs: &batch{table: c.table("job_table"), columns: jobColumns}}
	for _, t := range []string{"assoc_usage_hour_table", "assoc_usage_day_table", "assoc_usage_month_table"} {
		g.tables[t] = &batch{table: c.table(t), columns: "creation_time,mod_time,deleted,id,id_tres,time_start,alloc_secs"}
	}
	return g
}

// user draws the jobs of the k-th user, association id, and writes them
// and the rollups of its usage.
func (g *jobGen) user(ctx context.Context, db *sql.DB, k, id int) error {
	r, now := g.r, g.now
	g.active = g.active[:0]
	stop := now
	if k%10 == 9 {
		stop = g.idleFrom
	}
	// a job under way at stop ends there: the jobs still running
	// after the last rollup are the few below
	for t, busy := g.start, r.IntN(10) == 0; t < stop; {
		if !busy {
			t += int64(r.ExpFloat64() * g.idleSecs)
			busy = true
			continue
		}
		j := newJob(t, min(stop, t+1+int64(r.ExpFloat64()*g.jobSecs)), 1+r.IntN(64))
		if g.c.Site {
			j = j.site(r.Float64())
		}
		g.active = charge(g.active, j, now)
		g.jobID++
		if err := g.jobs.add(ctx, db, jobRow(g.jobID, id, j)...); err != nil {
			return err
		}
		t, busy = j.end, r.Float64() < g.another
	}
	// running since half an hour before the last rollup, which holds
	// that half hour
	if k%50 == 0 {
		j := newJob(now-1800, 0, 1+r.IntN(64))
		if g.c.Site {
			j = j.site(r.Float64())
		}
		g.active = charge(g.active, j, now)
		g.running = append(g.running, assocJob{id, j})
	}
	// rows in primary key order: each TRES's hours, then the next
	for _, t := range g.c.tres() {
		if err := writeUsage(ctx, db, g.tables, id, t, g.active, now); err != nil {
			return err
		}
	}
	return nil
}

// finish writes what is left of the rollups and the finished jobs,
// last_ran_table, then the running jobs, submitted after the finished
// ones.
func (g *jobGen) finish(ctx context.Context, db *sql.DB, st *Stats) error {
	for t, count := range map[string]*int{"assoc_usage_hour_table": &st.HourRows, "assoc_usage_day_table": &st.DayRows, "assoc_usage_month_table": &st.MonthRows} {
		if err := g.tables[t].flush(ctx, db); err != nil {
			return err
		}
		*count = g.tables[t].written
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+g.c.table("last_ran_table")+" VALUES (?, ?, ?)", g.now, g.now, g.now); err != nil {
		return err
	}
	if err := g.jobs.flush(ctx, db); err != nil {
		return err
	}
	st.Jobs = g.jobs.written
	for _, j := range g.running {
		g.jobID++
		if err := g.jobs.add(ctx, db, jobRow(g.jobID, j.assoc, j.job)...); err != nil {
			return err
		}
	}
	err := g.jobs.flush(ctx, db)
	st.RunningJobs = g.jobs.written - st.Jobs
	return err
}

// jobColumns are the NOT NULL columns without a default in 22.05's
// job_table, and what the exporter reads.
const jobColumns = "job_db_inx,id_assoc,id_job,id_qos,time_submit,time_start,time_end,tres_alloc,tres_req,deleted," +
	"cpus_req,job_name,id_resv,id_wckey,id_user,id_group,het_job_id,het_job_offset,state_reason_prev,nodes_alloc,`partition`,priority,state"

// jobRow is j of assoc, completed or running (end 0), with the values of
// jobColumns.
func jobRow(id, assoc int, j job) []any {
	var tres []string
	for i, a := range j.alloc {
		if a != 0 {
			tres = append(tres, fmt.Sprintf("%d=%d", allTRES[i], a))
		}
	}
	state := 3
	if j.end == 0 {
		state = 1
	}
	return []any{id, assoc, id, j.qos, j.start, j.start, j.end, strings.Join(tres, ","), "", 0, int(j.alloc[0]), "gen", 0, 0, 0, 0, 0, 0, 0, int(j.alloc[2]), j.partition, 0, state}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
