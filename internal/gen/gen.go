// Package gen fills a slurmdbd database with a synthetic cluster for
// benchmarks: an association tree (fairshare.Synthetic's shapes, with a
// consistent lft/rgt nested set, the accounts and users in acct_table and
// user_table, so that a slurmctld started after it loads the same tree)
// and months of finished jobs, which keep about one user association in
// ten busy at a time (one user in ten idle for the last two thirds of the
// months), with the hourly, daily and monthly rollups slurmdbd would make
// of them, and running jobs across the last rollup. It writes into the
// tables real slurmdbd created (load a real dump, or let slurmdbd create
// them, first); deterministic by seed.
package gen

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Config says what to generate.
type Config struct {
	Cluster      string // an existing cluster of cluster_table
	Associations int
	Depth        int
	Months       int
	// End is the end of the last rolled-up hour (an hour boundary).
	End  time.Time
	Seed uint64
	// JobsPerHour finished jobs end in an hour, on average; at least 1.
	// All usage is theirs, so the fewer they are, the longer they run:
	// users/10/JobsPerHour hours on average.
	JobsPerHour int
	// AllTRES writes rollup rows of cpu, node and billing, as real
	// slurmdbd does for jobs that allocate them (the jobs' tres_alloc);
	// otherwise billing alone, which is all fairshare reads.
	AllTRES bool
	// Site shapes the jobs as a production site's (SiteWeights): each
	// allocates memory, runs in partition SitePartition billing
	// SiteWeights (a fraction, which tres_alloc and the rollups truncate),
	// and one in ten runs under QOS high (UsageFactor 2), one in ten
	// under scavenger (UsageFactor 0), which Fill adds to qos_table.
	Site bool
}

// SitePartition and SiteWeights are the partition of Config.Site's jobs
// and its TRESBillingWeights: a job of c CPUs and 1500·c MB bills
// c·(1 + 1500·0.25/1024).
const (
	SitePartition = "p1"
	SiteWeights   = "CPU=1.0,Mem=0.25G"
	siteMemPerCPU = 1500
)

// allTRES are the TRES jobs allocate (newJob; memory only Site's), in
// tres_alloc's and the rollups' primary key order: cpu, mem, node,
// billing.
var allTRES = [4]int{1, 2, 4, 5}

// tres are the indexes in allTRES of the TRES the rollups hold.
func (c Config) tres() []int {
	switch {
	case c.AllTRES && c.Site:
		return []int{0, 1, 2, 3}
	case c.AllTRES:
		return []int{0, 2, 3}
	}
	return []int{3}
}

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

// hourUse is an hour's seconds of allTRES.
type hourUse struct {
	start int64
	secs  [len(allTRES)]int64
}

// charge adds j's seconds to active, as slurmdbd's hourly rollup does:
// each hour gets the job's overlap with it times what the job allocates,
// a running job's up to the last rollup, now. The hours stay in order as
// long as no job starts in an hour before the last one charged.
func charge(active []hourUse, j job, now int64) []hourUse {
	end := j.end
	if end == 0 {
		end = now
	}
	for h := j.start / 3600 * 3600; h < end; h += 3600 {
		if n := len(active); n == 0 || active[n-1].start != h {
			active = append(active, hourUse{start: h})
		}
		secs := min(end, h+3600) - max(j.start, h)
		for i, a := range j.alloc {
			active[len(active)-1].secs[i] += secs * a
		}
	}
	return active
}

// writeUsage writes the TRES allTRES[tres] of one association's active
// hours, and the days and months they sum to (UTC), as slurmdbd rolls
// them up.
func writeUsage(ctx context.Context, db *sql.DB, tables map[string]*batch, id, tres int, active []hourUse, now int64) error {
	var daySum, monthSum int64
	var dayStart, monthStart int64 = -1, -1
	flush := func(table string, start, sum int64) error {
		if sum == 0 {
			return nil
		}
		// slurmdbd writes a row when it rolls the period up
		rolled := time.Unix(start, 0).UTC().AddDate(0, 0, 1)
		if table == "assoc_usage_month_table" {
			rolled = time.Unix(start, 0).UTC().AddDate(0, 1, 0)
		}
		at := min(rolled.Unix(), now)
		return tables[table].add(ctx, db, at, at, 0, id, allTRES[tres], start, sum)
	}
	for _, u := range active {
		secs := u.secs[tres]
		t := time.Unix(u.start, 0).UTC()
		if d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix(); d != dayStart {
			if err := flush("assoc_usage_day_table", dayStart, daySum); err != nil {
				return err
			}
			dayStart, daySum = d, 0
		}
		if m := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix(); m != monthStart {
			if err := flush("assoc_usage_month_table", monthStart, monthSum); err != nil {
				return err
			}
			monthStart, monthSum = m, 0
		}
		if err := tables["assoc_usage_hour_table"].add(ctx, db, u.start+3600, u.start+3600, 0, id, allTRES[tres], u.start, secs); err != nil {
			return err
		}
		daySum += secs
		monthSum += secs
	}
	if err := flush("assoc_usage_day_table", dayStart, daySum); err != nil {
		return err
	}
	return flush("assoc_usage_month_table", monthStart, monthSum)
}

// Stats says what was written.
type Stats struct {
	Associations, HourRows, DayRows, MonthRows, Jobs, RunningJobs int
}

// Fill replaces the cluster's associations, rollups and jobs. db must be
// able to write (a root connection, not the exporter's).
func Fill(ctx context.Context, db *sql.DB, c Config) (Stats, error) {
	var st Stats
	if c.JobsPerHour < 1 {
		return st, fmt.Errorf("JobsPerHour %d: all usage comes from jobs, at least 1 an hour", c.JobsPerHour)
	}
	tree := fairshare.Synthetic(c.Associations, c.Depth, c.Seed)
	if err := c.clearTables(ctx, db); err != nil {
		return st, err
	}
	if err := c.writeAssociations(ctx, db, tree); err != nil {
		return st, err
	}
	if c.Site {
		if _, err := db.ExecContext(ctx, "INSERT INTO qos_table (creation_time, mod_time, deleted, id, name, description, usage_factor) VALUES"+
			" (0, 0, 0, ?, 'high', 'UsageFactor 2', 2), (0, 0, 0, ?, 'scavenger', 'UsageFactor 0', 0)"+
			" ON DUPLICATE KEY UPDATE usage_factor = VALUES(usage_factor)", siteHigh, siteScavenger); err != nil {
			return st, fmt.Errorf("adding the site's QOS: %w", err)
		}
	}
	st.Associations = tree.Len()
	err := c.writeJobs(ctx, db, tree, &st)
	return st, err
}

// table is the cluster's table s, quoted.
func (c Config) table(s string) string { return "`" + c.Cluster + "_" + s + "`" }

// clearTables empties the cluster's tables Fill writes.
func (c Config) clearTables(ctx context.Context, db *sql.DB) error {
	for _, t := range []string{"assoc_table", "assoc_usage_hour_table", "assoc_usage_day_table", "assoc_usage_month_table", "job_table", "last_ran_table"} {
		if _, err := db.ExecContext(ctx, "DELETE FROM "+c.table(t)); err != nil {
			return fmt.Errorf("clearing %s: %w", t, err)
		}
	}
	return nil
}

// writeAssociations writes tree's associations into assoc_table, and its
// accounts and users into acct_table and user_table.
func (c Config) writeAssociations(ctx context.Context, db *sql.DB, tree *fairshare.Tree) error {
	lft, rgt := nestedSet(tree)
	// 23.11+ link associations by id_parent and order them by lineage
	var lineageCols int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name IN ('id_parent', 'lineage')",
		c.Cluster+"_assoc_table").Scan(&lineageCols); err != nil {
		return err
	}
	withLineage := lineageCols == 2
	rows, accts, users := assocRows(tree, lft, rgt, c.End.Unix(), withLineage)
	cols := "creation_time,mod_time,deleted,is_def,id_assoc,user,acct,`partition`,parent_acct,lft,rgt,shares,qos"
	if withLineage {
		cols += ",id_parent,lineage"
	}
	if err := insert(ctx, db, "INSERT INTO "+c.table("assoc_table")+" ("+cols+") VALUES ", rows); err != nil {
		return err
	}
	if err := insert(ctx, db, "REPLACE INTO acct_table (creation_time,mod_time,deleted,name,description,organization) VALUES ", accts); err != nil {
		return err
	}
	return insert(ctx, db, "REPLACE INTO user_table (creation_time,mod_time,deleted,name,admin_level) VALUES ", users)
}

// nestedSet is tree's lft and rgt in pre-order, as slurmdbd keeps them up
// to 23.11.
func nestedSet(tree *fairshare.Tree) (lft, rgt []int) {
	n := tree.Len()
	kids := make([][]int, n)
	for i := 1; i < n; i++ {
		p := tree.Association(i).Parent
		kids[p] = append(kids[p], i)
	}
	lft, rgt = make([]int, n), make([]int, n)
	counter := 0
	var walk func(int)
	walk = func(i int) {
		counter++
		lft[i] = counter
		for _, k := range kids[i] {
			walk(k)
		}
		counter++
		rgt[i] = counter
	}
	walk(tree.Root())
	return lft, rgt
}

// assocRows are the values of tree's rows of assoc_table (with id_parent
// and lineage if withLineage), of its accounts in acct_table and of its
// users in user_table, created at now.
func assocRows(tree *fairshare.Tree, lft, rgt []int, now int64, withLineage bool) (rows, accts, users []string) {
	n := tree.Len()
	lineage := make([]string, n)
	rows = make([]string, 0, n)
	for i := 0; i < n; i++ {
		a := tree.Association(i)
		parent, qos := "", ""
		switch {
		case a.Parent < 0:
			qos = ",1," // normal, as sacctmgr gives root; the rest inherit it
		case !a.IsUser():
			parent = tree.Association(a.Parent).Account
		}
		if a.IsUser() {
			users = append(users, fmt.Sprintf("(%d,%d,0,'%s',1)", now, now, a.User))
		} else if a.Parent >= 0 {
			accts = append(accts, fmt.Sprintf("(%d,%d,0,'%s','%s','gen')", now, now, a.Account, a.Account))
		}
		// Synthetic gives each user one association: its default
		isDef := boolInt(a.IsUser())
		row := fmt.Sprintf("(%d,%d,0,%d,%d,'%s','%s','','%s',%d,%d,%d,'%s'", now, now, isDef, i+1, a.User, a.Account, parent, lft[i], rgt[i], a.Shares, qos)
		if withLineage {
			// parents come first in Synthetic's order
			switch {
			case a.Parent < 0:
				lineage[i] = "/"
			case a.IsUser():
				lineage[i] = lineage[a.Parent] + "0-" + a.User + "/"
			default:
				lineage[i] = lineage[a.Parent] + a.Account + "/"
			}
			row += fmt.Sprintf(",%d,'%s'", a.Parent+1, lineage[i]) // id_assoc is index+1; root's parent 0
		}
		rows = append(rows, row+")")
	}
	return rows, accts, users
}

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

// batch collects rows of one table and writes them with LOAD DATA LOCAL
// INFILE, some ten times faster than INSERT at a year of 100k
// associations.
type batch struct {
	table, columns string
	buf            bytes.Buffer
	rows, written  int
}

// add appends a row of values with no tab, newline or backslash in them.
func (b *batch) add(ctx context.Context, db *sql.DB, values ...any) error {
	for i, v := range values {
		if i > 0 {
			b.buf.WriteByte('\t')
		}
		switch v := v.(type) {
		case int:
			b.buf.WriteString(strconv.Itoa(v))
		case int64:
			b.buf.WriteString(strconv.FormatInt(v, 10))
		case string:
			b.buf.WriteString(v)
		default:
			panic(fmt.Sprintf("batch: value %v of type %T", v, v))
		}
	}
	b.buf.WriteByte('\n')
	b.rows++
	if b.rows < 200000 {
		return nil
	}
	return b.flush(ctx, db)
}

func (b *batch) flush(ctx context.Context, db *sql.DB) error {
	if b.rows == 0 {
		return nil
	}
	name := "gen" + b.table
	data := b.buf.Bytes()
	mysql.RegisterReaderHandler(name, func() io.Reader { return bytes.NewReader(data) })
	defer mysql.DeregisterReaderHandler(name)
	if _, err := db.ExecContext(ctx, "LOAD DATA LOCAL INFILE 'Reader::"+name+"' INTO TABLE "+b.table+" ("+b.columns+")"); err != nil {
		return fmt.Errorf("loading %d rows into %s: %w", b.rows, b.table, err)
	}
	b.written += b.rows
	b.rows = 0
	b.buf.Reset()
	return nil
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

// insert writes rows in statements of at most 5000.
func insert(ctx context.Context, db *sql.DB, prefix string, rows []string) error {
	for len(rows) > 0 {
		k := min(len(rows), 5000)
		if _, err := db.ExecContext(ctx, prefix+strings.Join(rows[:k], ",")); err != nil {
			return fmt.Errorf("%s...: %w", prefix[:min(len(prefix), 60)], err)
		}
		rows = rows[k:]
	}
	return nil
}
