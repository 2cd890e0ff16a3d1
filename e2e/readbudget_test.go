package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// The read budget (issue 33): what serve and check cost slurmctld and
// the host while the state file is hidden, so that they infer the phase
// of slurmctld's decay passes from reads of sshare.
const (
	// budgetInferReads is the most sshare reads serve may make in any one
	// of its first two periods, while it infers the phase.
	budgetInferReads = 3
	// budgetBuildInfo is the most REQUEST_BUILD_INFO (scontrol show
	// config, slurmctld's boot) of a whole serve run.
	budgetBuildInfo = 3
	// budgetCheckReads and budgetCheckPerMinute bound check's reads.
	budgetCheckReads, budgetCheckPerMinute = 15, 3
	// budgetMinuteSlack: the wrapper logs a read a few milliseconds after
	// the exporter timed its start, so that reads spaced a minute apart by
	// the exporter may be logged a little less than a minute apart.
	budgetMinuteSlack = 500 * time.Millisecond
)

// TestReadBudget measures serve's and check's reads of sshare and the
// RPCs they cost slurmctld, on each of the releases of
// $SLURMDBD_EXPORTER_RELEASES (default 22.05 and 26.05) side by side, on
// a tree of $READ_BUDGET_ASSOCIATIONS (default 10,000) associations
// written by internal/gen as BenchmarkScale does, three of them running
// jobs and one with a job ended, whose usage decays, so that usage moves
// at every decay pass; for each
// PriorityCalcPeriod of $READ_BUDGET_CALC (default "1m 5m"; slurmctld
// restarted on the new slurm.conf between them), with the state file
// hidden (an empty --slurm.state-dir):
//
//   - slurmctld's CPU over an idle stretch (one period, at least a
//     minute) without the exporter;
//   - serve for $READ_BUDGET_PERIODS periods (default 10 at 1m and 8 at
//     5m; "6" for every period, or "5m=6,1m=10"), sdiag's counters reset
//     first: its sshare and scontrol calls, logged by wrappers first on its
//     PATH, by period from its start; REQUEST_SHARE_INFO,
//     REQUEST_BUILD_INFO and REQUEST_PING by sdiag; slurmctld's CPU
//     (/proc/<pid>/stat) and the exporter's with its children (rusage);
//   - check in database mode, live, --phase.wait auto: its reads, RPCs,
//     wall time and exit code.
//
// It fails where serve reads more than budgetInferReads times in one of
// its first two periods, more than once a period on average from the
// third on (one more allowed in all), asks slurmctld's configuration more
// than budgetBuildInfo times, and where check reads more than
// budgetCheckReads times, more than budgetCheckPerMinute in a minute, or
// exits 2 or more; it logs a table of what it measured (make
// read-budget).
func TestReadBudget(t *testing.T) {
	calcs := readBudgetCalcs(t)
	periods := readBudgetPeriods(t, calcs)
	n := scaleEnv("READ_BUDGET_ASSOCIATIONS", 10000)
	releases := []string{"22.05", "26.05"}
	if r := os.Getenv("SLURMDBD_EXPORTER_RELEASES"); r != "" {
		releases = strings.Fields(r)
	}
	// setup, then per period: the idle stretch, serve, check (at most a
	// period and 10 s of reads) and a restart
	est := 5 * time.Minute
	var plan []string
	for _, p := range calcs {
		est += budgetIdle(p) + time.Duration(periods[p])*p + p + 2*time.Minute
		plan = append(plan, fmt.Sprintf("%v × %d", p, periods[p]))
	}
	t.Logf("read budget: machine: %s; %s", machine(), time.Now().UTC().Format(time.RFC3339))
	t.Logf("read budget: %d associations, releases %s side by side, PriorityCalcPeriod × serve periods: %s; about %v",
		n, strings.Join(releases, " and "), strings.Join(plan, ", "), est.Round(time.Minute))
	var mu sync.Mutex
	var rows []budgetRow
	t.Cleanup(func() {
		slices.SortFunc(rows, func(a, b budgetRow) int {
			if a.release != b.release {
				return strings.Compare(a.release, b.release)
			}
			return int(a.period - b.period)
		})
		t.Logf("read budget: table (%s)", machine())
		for _, l := range budgetTable(rows) {
			t.Logf("read budget: %s", l)
		}
	})
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			b := startBudgetCluster(t, release, n)
			for _, p := range calcs {
				row := b.measure(t, p, periods[p])
				mu.Lock()
				rows = append(rows, row)
				mu.Unlock()
			}
		})
	}
}

// readBudgetCalcs are the PriorityCalcPeriods to measure, whole minutes.
func readBudgetCalcs(t *testing.T) []time.Duration {
	v := os.Getenv("READ_BUDGET_CALC")
	if v == "" {
		v = "1m 5m"
	}
	var out []time.Duration
	for _, f := range strings.Fields(v) {
		d, err := time.ParseDuration(f)
		if err != nil || d < time.Minute || d%time.Minute != 0 {
			t.Fatalf("READ_BUDGET_CALC=%q: expected whole minutes (1m 5m)", v)
		}
		out = append(out, d)
	}
	return out
}

// readBudgetPeriods is how many periods serve runs at each
// PriorityCalcPeriod: 10 at 1m and 8 otherwise, or $READ_BUDGET_PERIODS,
// a number for every period or period=number pairs ("5m=6,1m=10").
func readBudgetPeriods(t *testing.T, calcs []time.Duration) map[time.Duration]int {
	m := map[time.Duration]int{}
	for _, p := range calcs {
		m[p] = 8
		if p == time.Minute {
			m[p] = 10
		}
	}
	v := os.Getenv("READ_BUDGET_PERIODS")
	bad := func() {
		t.Fatalf("READ_BUDGET_PERIODS=%q: expected a number of periods of at least 3, or pairs like 5m=6,1m=10", v)
	}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		k, num, pair := strings.Cut(f, "=")
		if !pair {
			num = k
		}
		count, err := strconv.Atoi(num)
		if err != nil || count < 3 {
			bad()
		}
		if !pair {
			for p := range m {
				m[p] = count
			}
			continue
		}
		p, err := time.ParseDuration(k)
		if err != nil {
			bad()
		}
		m[p] = count
	}
	return m
}

// budgetIdle is how long slurmctld's idle CPU is measured: a period, so
// that it holds a decay pass, and at least a minute.
func budgetIdle(p time.Duration) time.Duration { return max(time.Minute, p) }

// machine describes this machine as make bench does.
func machine() string {
	return fmt.Sprintf("%d cores, %s, %s", runtime.NumCPU(), cpuModel(), runtime.Version())
}

// budgetCluster is a release's cluster with the generated tree and a few
// running jobs.
type budgetCluster struct {
	c       *slurmharness.Cluster
	release string
	dsn     string
	hidden  string
	period  time.Duration // PriorityCalcPeriod slurmctld runs with
}

// startBudgetCluster starts a cluster, writes n generated associations
// into its database with slurmctld and slurmdbd stopped (as BenchmarkScale
// does; slurmdbd restarted, so that it caches nothing of the old tree),
// starts slurmctld without its association state so that it loads them,
// then adds phys and chem with alice, bob and carol and starts a long job
// of each. The cluster is the harness's own (directory, MariaDB, ports),
// removed when the test ends.
func startBudgetCluster(t *testing.T, release string, n int) *budgetCluster {
	begin := time.Now()
	c := slurmharness.Start(t, slurmharness.Config{Release: release})
	b := &budgetCluster{c: c, release: release, hidden: hiddenStateDir(t), period: c.CalcPeriod()}
	root, err := sql.Open("mysql", c.DB.DSN("root", "", "slurm_acct_db"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	c.DB.MustSQL("SET GLOBAL innodb_buffer_pool_size = 1073741824; SET GLOBAL innodb_flush_log_at_trx_commit = 2")
	for _, d := range []string{"slurmctld", "slurmdbd"} {
		if c.StopDaemon(d) {
			t.Fatalf("%s had to be killed", d)
		}
	}
	// 23.11 and later link associations by id_parent and lineage, and
	// 26.05's schema (not 24.11's) has no lft and rgt, which gen writes
	// too: it gets columns to write them into, dropped before slurmdbd
	// starts again
	ctx := context.Background()
	assocTable := "`" + c.Name + "_assoc_table`"
	var nested int
	if err := root.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name IN ('lft', 'rgt')",
		c.Name+"_assoc_table").Scan(&nested); err != nil {
		t.Fatal(err)
	}
	if nested == 0 {
		if _, err := root.ExecContext(ctx, "ALTER TABLE "+assocTable+" ADD COLUMN lft int unsigned NOT NULL DEFAULT 0, ADD COLUMN rgt int unsigned NOT NULL DEFAULT 0"); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	st, err := gen.Fill(ctx, root, gen.Config{Cluster: c.Name, Associations: n, Depth: 6, Months: 1,
		End: time.Now().Truncate(time.Hour), Seed: 1, JobsPerHour: 100})
	if err != nil {
		t.Fatal(err)
	}
	if nested == 0 {
		if _, err := root.ExecContext(ctx, "ALTER TABLE "+assocTable+" DROP COLUMN lft, DROP COLUMN rgt"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("read budget: %s: generated in %v: %+v", release, time.Since(t0).Round(time.Second), st)
	c.StartDaemon("slurmdbd")
	budgetWait(t, "slurmdbd to answer", time.Minute, func() error {
		_, err := c.Run("sacctmgr", "-n", "-P", "show", "cluster")
		return err
	})
	// slurmctld must take the tree from slurmdbd, not from its state; no
	// job has run yet, so it starts afresh (26.05 will not start with
	// the rest of its state and without assoc_usage)
	states, err := os.ReadDir(c.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range states {
		if err := os.RemoveAll(filepath.Join(c.StateDir(), f.Name())); err != nil {
			t.Fatal(err)
		}
	}
	c.RestartCtld("")
	out := c.MustRun("sshare", "-a", "-l", "-P")
	if rows := strings.Count(out, "\n") - 1; rows < n {
		t.Fatalf("sshare printed %d associations, the database holds %d: slurmctld did not load the generated tree", rows, n)
	}
	loadTwoAccounts(c, "dave")
	// longer than the whole run; the harness cancels them at its end
	const secs = 4 * 3600
	ids := []string{c.Submit("alice", "phys", "", 64, secs), c.Submit("bob", "phys", "", 32, secs), c.Submit("carol", "chem", "", 16, secs)}
	// dave's job ends before the measurements, and its usage then decays
	// at every pass, as on every real cluster. The running jobs' usage
	// alone, started together, only rises, in proportion: a pass shows
	// only as a rise, which reads under AccountingStorageEnforce=limits
	// cannot tell from a job's end (passes.Between).
	// READ_BUDGET_RUNNING_ONLY=1 leaves dave's job out (the test's first
	// run, which read three times a period throughout before 01e6125).
	ended, jobs := "", "3 running jobs and one ended"
	if os.Getenv("READ_BUDGET_RUNNING_ONLY") != "1" {
		ended = c.Submit("dave", "chem", "", 64, 60)
	} else {
		jobs = "3 running jobs alone"
	}
	c.WaitRunning(5*time.Minute, ids...)
	if ended != "" {
		c.WaitGone(5*time.Minute, ended)
	}
	b.dsn = readerDSNFile(t, c)
	t.Logf("read budget: %s: cluster of %d associations with %s up in %v", release, st.Associations+6, jobs, time.Since(begin).Round(time.Second))
	return b
}

// budgetWait polls ok every half second for at most d.
func budgetWait(t *testing.T, what string, d time.Duration, ok func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := ok()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %s: %v", d, what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// setPeriod restarts slurmctld with PriorityCalcPeriod p in slurm.conf
// (the harness writes 1 minute; the exporter reads the same file). The
// file is the cluster's own, removed with it.
func (b *budgetCluster) setPeriod(t *testing.T, p time.Duration) {
	c := b.c
	if c.StopDaemon("slurmctld") {
		t.Errorf("read budget: %s: slurmctld killed on its way to PriorityCalcPeriod %v", b.release, p)
	}
	conf, err := os.ReadFile(c.Conf)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^PriorityCalcPeriod=.*$`)
	if !re.Match(conf) {
		t.Fatalf("%s holds no PriorityCalcPeriod line", c.Conf)
	}
	conf = re.ReplaceAll(conf, []byte(fmt.Sprintf("PriorityCalcPeriod=%d", int(p/time.Minute))))
	if err := os.WriteFile(c.Conf, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	c.StartDaemon("slurmctld")
	budgetWait(t, "slurmctld to answer", 2*time.Minute, func() error {
		out, err := c.Run("scontrol", "ping")
		if err == nil && !strings.Contains(out, "UP") {
			err = fmt.Errorf("%s", out)
		}
		return err
	})
	want := fmt.Sprintf("%02d:%02d:00", int(p.Hours()), int(p.Minutes())%60)
	if cfg := c.MustRun("scontrol", "show", "config"); !regexp.MustCompile(`(?m)^PriorityCalcPeriod\s*=\s*` + want).MatchString(cfg) {
		t.Fatalf("slurmctld restarted without PriorityCalcPeriod %s", want)
	}
	b.period = p
}

// budgetRow is what one release and period measured.
type budgetRow struct {
	release string
	period  time.Duration
	periods int
	// serve
	perPeriod             []int
	sshareTook            time.Duration // median of serve's reads
	failedReads           int
	rpc                   map[string]int // sdiag's counts over serve's run
	scontrols             int            // scontrol calls serve made
	minutes               float64        // serve's run
	idleCPU, serveCPU     float64        // slurmctld, s/min
	exporterCPU, childCPU float64        // s/min, the exporter with its children, and the children alone
	phase                 string
	// check
	checkReads, checkPerMinute int
	checkRPC                   map[string]int
	checkWall                  time.Duration
	checkCode                  int
	checkCPU                   float64 // s, with children
	checkPhase                 string
	failures                   []string
}

func (r budgetRow) steady() (reads, periods int) {
	for i := 2; i < len(r.perPeriod); i++ {
		reads += r.perPeriod[i]
		periods++
	}
	return reads, periods
}

// measure runs the idle stretch, serve and check at PriorityCalcPeriod p
// and judges them against the budgets.
func (b *budgetCluster) measure(t *testing.T, p time.Duration, periods int) budgetRow {
	c := b.c
	if b.period != p {
		b.setPeriod(t, p)
	}
	row := budgetRow{release: b.release, period: p, periods: periods}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		row.failures = append(row.failures, msg)
		t.Errorf("read budget: %s %v: %s", b.release, p, msg)
	}
	// slurmctld's start (loading the tree) is past
	time.Sleep(30 * time.Second)
	boot, err := sshare.ParseBootTime(strings.NewReader(c.MustRun("scontrol", "show", "config")))
	if err != nil {
		t.Fatal(err)
	}

	// slurmctld alone
	idle := budgetIdle(p)
	cpu0 := ctldCPU(t, c)
	time.Sleep(idle)
	row.idleCPU = (ctldCPU(t, c) - cpu0) / idle.Minutes()

	// serve
	w := newCallLog(t, c)
	rpc0 := resetSdiag(t, c)
	cpu0 = ctldCPU(t, c)
	start := time.Now()
	s := startServe(t, w.env, "--dsn-file", b.dsn, "--slurm-conf", c.Conf, "--slurm.state-dir", b.hidden, "--slurmctld.pid-file", c.PidFile())
	time.Sleep(time.Until(start.Add(time.Duration(periods) * p)))
	m, _ := s.scrape()
	self, children := procCPU(s.cmd.Process.Pid)
	s.stop()
	end := time.Now()
	row.serveCPU = ctldCPU(t, c) - cpu0
	row.rpc = rpcSince(t, c, rpc0)
	row.minutes = end.Sub(start).Minutes()
	row.serveCPU /= row.minutes
	total := self + children
	if ps := s.cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			total = rusageSeconds(ru)
		}
	}
	row.exporterCPU, row.childCPU = total/row.minutes, children/row.minutes
	calls := w.read(t)
	shares := calls.of("sshare")
	row.scontrols = len(calls.of("scontrol"))
	row.perPeriod = make([]int, periods)
	var took []time.Duration
	for _, call := range shares {
		if k := int(call.start.Sub(start) / p); k >= 0 && k < periods {
			row.perPeriod[k]++
		}
		if call.took > 0 {
			took = append(took, call.took)
		}
		if call.rc != 0 {
			row.failedReads++
		}
	}
	if len(took) > 0 {
		row.sshareTook = median(took)
	}
	ran, _, _ := slurmstate.LastDecayRan(c.StateDir())
	passAt := "?"
	if !ran.IsZero() {
		passAt = fmt.Sprintf("boot+%v", offsetMod(ran.Sub(boot), p))
	}
	cluster := c.Name
	inferred, ok := m[series("slurmdbd_fairshare_decay_last_pass_timestamp_seconds", "slurm_cluster", cluster, "source", "inferred")]
	row.phase = "not inferred"
	if ok && !ran.IsZero() {
		at := time.Unix(0, int64(inferred*1e9))
		row.phase = fmt.Sprintf("inferred boot+%v ±%gs (state file %s)", offsetMod(at.Sub(boot), p).Round(time.Millisecond),
			m[series("slurmdbd_fairshare_decay_phase_uncertainty_seconds", "slurm_cluster", cluster, "source", "inferred")], passAt)
	}
	t.Logf("read budget: %s %v: serve %.1f min, up{reported} %v, boot %s, passes at %s mod %v (state file), phase %s; sshare reads per period %v, %d failed, median %v; scontrol %d; sdiag %v",
		b.release, p, row.minutes, m[series("slurmdbd_exporter_up", "source", "reported")], boot.Format(time.TimeOnly), passAt, p, row.phase,
		row.perPeriod, row.failedReads, row.sshareTook.Round(time.Millisecond), row.scontrols, row.rpc)
	t.Logf("read budget: %s %v: serve's sshare calls: %s", b.release, p, calls.describe(start, boot, p, "sshare"))
	t.Logf("read budget: %s %v: serve's scontrol calls: %s", b.release, p, calls.describe(start, boot, p, "scontrol"))
	for i := 0; i < min(2, periods); i++ {
		if row.perPeriod[i] > budgetInferReads {
			fail("serve read sshare %d times in period %d, inferring: at most %d", row.perPeriod[i], i+1, budgetInferReads)
		}
	}
	if reads, n := row.steady(); reads > n+1 {
		fail("serve read sshare %d times in periods 3 to %d: at most one a period (%d, and one for rounding)", reads, periods, n+1)
	}
	if got := row.rpc["REQUEST_BUILD_INFO"]; got > budgetBuildInfo {
		fail("REQUEST_BUILD_INFO %d times over serve's run: at most %d", got, budgetBuildInfo)
	}
	if got, want := row.rpc["REQUEST_SHARE_INFO"], len(shares); got != want {
		t.Logf("read budget: %s %v: sdiag counts %d REQUEST_SHARE_INFO, the wrapper %d sshare calls", b.release, p, got, want)
	}
	if row.failedReads > 0 {
		fail("%d of serve's sshare reads failed", row.failedReads)
	}

	// check
	w = newCallLog(t, c)
	rpc0 = resetSdiag(t, c)
	start = time.Now()
	code, out, stderr, cpu := runBudgetCheck(t, w.env, "check", "--output", "json", "--dsn-file", b.dsn, "--slurm-conf", c.Conf,
		"--slurm.state-dir", b.hidden, "--slurmctld.pid-file", c.PidFile(), "--phase.wait", "auto")
	row.checkWall, row.checkCode, row.checkCPU = time.Since(start), code, cpu
	row.checkRPC = rpcSince(t, c, rpc0)
	calls = w.read(t)
	shares = calls.of("sshare")
	row.checkReads = len(shares)
	for i := range shares {
		k := 0
		for _, o := range shares[i:] {
			if o.start.Sub(shares[i].start) < time.Minute-budgetMinuteSlack {
				k++
			}
		}
		row.checkPerMinute = max(row.checkPerMinute, k)
	}
	var rep drift.Report
	row.checkPhase = "?"
	if err := json.Unmarshal([]byte(out), &rep); err == nil && rep.Phase != nil {
		row.checkPhase = fmt.Sprintf("%s ±%gs", rep.Phase.Source, rep.Phase.Uncertainty.Seconds())
	}
	t.Logf("read budget: %s %v: check exit %d in %v, phase %s, %d sshare reads (at most %d in a minute), sdiag %v; sshare calls: %s; scontrol calls: %s",
		b.release, p, code, row.checkWall.Round(100*time.Millisecond), row.checkPhase, row.checkReads, row.checkPerMinute, row.checkRPC,
		calls.describe(start, boot, p, "sshare"), calls.describe(start, boot, p, "scontrol"))
	if code >= exitError {
		t.Logf("read budget: %s %v: check's stderr:\n%s", b.release, p, stderr)
		fail("check exited %d", code)
	}
	if row.checkReads > budgetCheckReads {
		fail("check read sshare %d times: at most %d", row.checkReads, budgetCheckReads)
	}
	if row.checkPerMinute > budgetCheckPerMinute {
		fail("check read sshare %d times in a minute: at most %d", row.checkPerMinute, budgetCheckPerMinute)
	}
	t.Logf("read budget: %s", budgetTable([]budgetRow{row})[2])
	return row
}

// offsetMod is d modulo p, in [0, p).
func offsetMod(d, p time.Duration) time.Duration {
	d %= p
	if d < 0 {
		d += p
	}
	return d
}

// budgetTable is the rows as a Markdown table, one line each.
func budgetTable(rows []budgetRow) []string {
	out := []string{
		"| release | PriorityCalcPeriod | serve: sshare reads per period | inferring (periods 1–2) | steady (periods 3+) | sshare took (median) | RPCs/min: SHARE_INFO, BUILD_INFO, PING (BUILD_INFO in all) | slurmctld CPU s/min: idle, with serve, over idle | exporter host CPU s/min (of it children) | check: reads, most in a minute, wall, exit, phase | check: RPCs SHARE_INFO, BUILD_INFO, PING; host CPU s | budgets |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|",
	}
	for _, r := range rows {
		infer := 0
		for i := 0; i < min(2, len(r.perPeriod)); i++ {
			infer = max(infer, r.perPeriod[i])
		}
		reads, n := r.steady()
		verdict := "held"
		if len(r.failures) > 0 {
			verdict = "FAILED: " + strings.Join(r.failures, "; ")
		}
		perMin := func(k string) float64 { return float64(r.rpc[k]) / r.minutes }
		out = append(out, fmt.Sprintf("| %s | %v | %v | max %d | %d in %d periods (%.2f a period) | %v | %.2f, %.2f, %.2f (%d) | %.3f, %.3f, %+.3f | %.3f (%.3f) | %d, %d, %v, %d, %s | %d, %d, %d; %.2f | %s |",
			r.release, r.period, r.perPeriod, infer, reads, n, float64(reads)/float64(max(n, 1)), r.sshareTook.Round(10*time.Millisecond),
			perMin("REQUEST_SHARE_INFO"), perMin("REQUEST_BUILD_INFO"), perMin("REQUEST_PING"), r.rpc["REQUEST_BUILD_INFO"],
			r.idleCPU, r.serveCPU, r.serveCPU-r.idleCPU, r.exporterCPU, r.childCPU,
			r.checkReads, r.checkPerMinute, r.checkWall.Round(100*time.Millisecond), r.checkCode, r.checkPhase,
			r.checkRPC["REQUEST_SHARE_INFO"], r.checkRPC["REQUEST_BUILD_INFO"], r.checkRPC["REQUEST_PING"], r.checkCPU, verdict))
	}
	return out
}

// callLog is a directory of wrappers around sshare and scontrol, first on
// the PATH of env, that log each call's start and end and run the client
// the cluster's own PATH finds (in a chroot release, its wrapper).
type callLog struct {
	env  []string
	path string
}

func newCallLog(t *testing.T, c *slurmharness.Cluster) *callLog {
	t.Helper()
	dir := t.TempDir()
	env := c.Env()
	path := os.Getenv("PATH")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one holds (os/exec)
		}
	}
	l := &callLog{path: filepath.Join(dir, "calls.log")}
	for _, name := range []string{"sshare", "scontrol"} {
		bin := ""
		for _, d := range filepath.SplitList(path) {
			if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				bin = filepath.Join(d, name)
				break
			}
		}
		if bin == "" {
			t.Fatalf("%s not on PATH %s", name, path)
		}
		// bash's EPOCHREALTIME: no fork to time a call
		script := fmt.Sprintf("#!/bin/bash\n"+
			"printf 'start %%s %[1]s %%s\\n' \"$EPOCHREALTIME\" \"$*\" >> %[2]s\n"+
			"%[3]s \"$@\"\nrc=$?\n"+
			"printf 'end %%s %[1]s %%s %%d\\n' \"$EPOCHREALTIME\" \"$*\" $rc >> %[2]s\n"+
			"exit $rc\n", name, l.path, bin)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l.env = append(env, "PATH="+dir+":"+path)
	return l
}

// call is one logged call: its start, how long it took and its exit
// status (took 0: it never ended, killed with its wrapper).
type call struct {
	name, args string
	start      time.Time
	took       time.Duration
	rc         int
}

type calls []call

func (l *callLog) read(t *testing.T) calls {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out calls
	open := map[string][]int{} // name and args: the calls not ended, in order
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		sec, err := strconv.ParseFloat(strings.Replace(f[1], ",", ".", 1), 64)
		if err != nil {
			t.Fatalf("call log line %q: %v", line, err)
		}
		at := time.Unix(0, int64(sec*1e9))
		switch f[0] {
		case "start":
			key := strings.Join(f[2:], " ")
			out = append(out, call{name: f[2], args: strings.Join(f[3:], " "), start: at, rc: -1})
			open[key] = append(open[key], len(out)-1)
		case "end":
			key := strings.Join(f[2:len(f)-1], " ")
			if q := open[key]; len(q) > 0 {
				c := &out[q[0]]
				c.took = at.Sub(c.start)
				c.rc, _ = strconv.Atoi(f[len(f)-1])
				open[key] = q[1:]
			}
		}
	}
	return out
}

func (cs calls) of(name string) calls {
	var out calls
	for _, c := range cs {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

// describe lists the calls of name: each one's start from start, and
// from slurmctld's boot modulo the period, and how long it took.
func (cs calls) describe(start, boot time.Time, p time.Duration, name string) string {
	var parts []string
	for _, c := range cs.of(name) {
		parts = append(parts, fmt.Sprintf("+%.1fs (boot+%.1fs mod %v, %.2fs)", c.start.Sub(start).Seconds(), offsetMod(c.start.Sub(boot), p).Seconds(), p, c.took.Seconds()))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// resetSdiag resets slurmctld's counters (sdiag -r) and returns its RPC
// counts right after, which rpcSince subtracts in case a release keeps
// some.
func resetSdiag(t *testing.T, c *slurmharness.Cluster) map[string]int {
	t.Helper()
	c.MustRun("sdiag", "-r")
	return sdiagRPCs(t, c.MustRun("sdiag"))
}

// rpcSince is the RPCs by message type slurmctld received since sdiag
// counted before.
func rpcSince(t *testing.T, c *slurmharness.Cluster, before map[string]int) map[string]int {
	t.Helper()
	now := sdiagRPCs(t, c.MustRun("sdiag"))
	out := map[string]int{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	// sdiag's own
	delete(out, "REQUEST_STATS_INFO")
	return out
}

var sdiagRPC = regexp.MustCompile(`^\s+([A-Z][A-Z0-9_]+)\s+\(\s*\d+\)\s+count:(\d+)`)

// sdiagRPCs reads sdiag's "Remote Procedure Call statistics by message
// type".
func sdiagRPCs(t *testing.T, out string) map[string]int {
	t.Helper()
	m := map[string]int{}
	in, seen := false, false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, "by message type"):
			in, seen = true, true
		case in && (strings.TrimSpace(l) == "" || !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, " ")):
			in = false
		case in:
			if s := sdiagRPC.FindStringSubmatch(l); s != nil {
				n, _ := strconv.Atoi(s[2])
				m[s[1]] += n
			}
		}
	}
	if !seen {
		t.Fatalf("sdiag: no RPC statistics by message type:\n%s", out)
	}
	return m
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go supports but alpha and ia64).
const clockTick = 100

// procCPU is a process's own CPU (utime+stime) and that of its children
// it waited for (cutime+cstime), in seconds.
func procCPU(pid int) (self, children float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return math.NaN(), math.NaN()
	}
	// after the command's name, which may hold spaces: field 3 on
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return math.NaN(), math.NaN()
	}
	v := func(k int) float64 { x, _ := strconv.ParseFloat(f[k], 64); return x / clockTick }
	return v(11) + v(12), v(13) + v(14)
}

// ctldCPU is slurmctld's CPU so far, in seconds.
func ctldCPU(t *testing.T, c *slurmharness.Cluster) float64 {
	t.Helper()
	self, _ := procCPU(ctldPid(t, c))
	return self
}

// ctldPid is the cluster's slurmctld: from its pid file (in a chroot
// release chroot execs it, so the pid is the daemon's), else the
// slurmctld whose SLURM_CONF is the cluster's, as the host or the chroot
// names it.
func ctldPid(t *testing.T, c *slurmharness.Cluster) int {
	t.Helper()
	isCtld := func(pid int) bool {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return err == nil && strings.TrimSpace(string(comm)) == "slurmctld"
	}
	if b, err := os.ReadFile(filepath.Join(c.Dir, "slurmctld.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && isCtld(pid) {
			return pid
		}
	}
	confs := []string{"SLURM_CONF=" + c.Conf, "SLURM_CONF=/" + filepath.Join(filepath.Base(c.Dir), "slurm.conf")}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || !isCtld(pid) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range bytes.Split(env, []byte{0}) {
			if slices.Contains(confs, string(kv)) {
				return pid
			}
		}
	}
	t.Fatalf("no slurmctld of %s running", c.Conf)
	return 0
}

func rusageSeconds(ru *syscall.Rusage) float64 {
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// runBudgetCheck runs the built binary to its end and returns its exit
// code, output and CPU with its children's.
func runBudgetCheck(t *testing.T, env []string, args ...string) (code int, stdout, stderr string, cpu float64) {
	t.Helper()
	code, stdout, stderr, ps := runExporterProc(t, env, args...)
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		cpu = rusageSeconds(ru)
	}
	return code, stdout, stderr, cpu
}
