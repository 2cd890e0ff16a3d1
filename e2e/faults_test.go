package e2e

// Faults against the built binary, with a throwaway MariaDB holding the
// real Slurm 24.11 database of testdata/slurm-24.11 (cluster v2411) and
// stand-in Slurm commands on PATH: a database outage, a hanging sshare, a
// held table lock, bad rows, bad configuration. Each exporter reads the
// database as a SELECT-only user whose password the tests look for in
// argv, the environment, every log line and every scrape.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// faultOutage is how long the database stays down in
// TestFaultDatabaseOutage.
const faultOutage = 3 * time.Minute

type faultEnv struct {
	t       *testing.T
	srv     *mariadbtest.Server
	dir     string
	secret  string
	dsnFile string
	conf    string
	fakeBin string
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	srv := mariadbtest.Start(t, "")
	srv.Load("slurm_acct_db", filepath.Join("..", "testdata", "slurm-24.11", "slurm_acct_db.sql.gz"))
	f := &faultEnv{t: t, srv: srv, dir: t.TempDir(), secret: fmt.Sprintf("pw%016x", rand.Uint64())}
	srv.CreateReader("exporter", f.secret, "slurm_acct_db")
	f.dsnFile = writeDSN(t, srv.DSN("exporter", f.secret, "slurm_acct_db"))
	f.conf = filepath.Join(f.dir, "slurm.conf")
	f.fakeBin = filepath.Join(f.dir, "bin")
	// The capture's rows are of 2026-11-22 and the exporter computes at the
	// wall clock: with a 1-hour half-life they fell out of the 40-half-life
	// horizon two days later, and the bad rows below with them (CI found
	// TestFaultBadData blind to them). A year's half-life keeps them read
	// for decades.
	f.write(f.conf, "ClusterName=v2411\nPriorityType=priority/multifactor\nPriorityDecayHalfLife=365-0\nPriorityCalcPeriod=1\nStateSaveLocation="+filepath.Join(f.dir, "state")+"\n")
	if err := os.Mkdir(f.fakeBin, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *faultEnv) write(path, content string) {
	f.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// fake puts a stand-in for a Slurm command on the exporter's PATH.
func (f *faultEnv) fake(name, script string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.fakeBin, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *faultEnv) env() []string {
	return append(os.Environ(), "PATH="+f.fakeBin+":"+os.Getenv("PATH"))
}

// serve starts the exporter on f's database, waits until it is ready, and
// checks that the password is in neither its argv nor its environment.
func (f *faultEnv) serve(args ...string) *served {
	f.t.Helper()
	return f.serveUntil("/-/ready", args...)
}

func (f *faultEnv) serveUntil(path string, args ...string) *served {
	f.t.Helper()
	s := startServeUntil(f.t, path, f.env(), append([]string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf}, args...)...)
	s.secret = f.secret
	for _, file := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", s.cmd.Process.Pid, file))
		if err != nil {
			f.t.Fatal(err)
		}
		if bytes.Contains(b, []byte(f.secret)) {
			f.t.Errorf("the DSN password is in the exporter's /proc/%s", file)
		}
	}
	return s
}

// threads counts the exporter's sessions on the server.
func (f *faultEnv) threads() int {
	f.t.Helper()
	out := f.srv.MustSQL("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'exporter'")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		f.t.Fatalf("processlist: %q", out)
	}
	return n
}

// prefixed are the samples whose series starts with prefix.
func prefixed(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

var (
	upDB          = series("slurmdbd_exporter_up", "source", "db")
	upReported    = series("slurmdbd_exporter_up", "source", "reported")
	lastDB        = series("slurmdbd_exporter_last_success_timestamp_seconds", "source", "db")
	ageReported   = series("slurmdbd_exporter_source_age_seconds", "source", "reported")
	errorsDB      = series("slurmdbd_exporter_stage_errors_total", "stage", "db")
	errorsConnect = series("slurmdbd_exporter_stage_errors_total", "stage", "connect")
	errorsRep     = series("slurmdbd_exporter_stage_errors_total", "stage", "reported")
	tookReported  = series("slurmdbd_exporter_stage_duration_seconds", "stage", "reported")
)

// dbFailures counts the refreshes that failed to read the database: each
// fails at one stage, connect or db.
func dbFailures(m map[string]float64) float64 { return m[errorsDB] + m[errorsConnect] }

// TestFaultDatabaseOutage: MariaDB stopped for faultOutage while serving.
// Every scrape answers with the last good values, up{source="db"} is 0
// and the last success stays where it was; MariaDB back, the next refresh
// recovers, and goroutines, open files and server sessions return to
// their baseline.
func TestFaultDatabaseOutage(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	const interval = 2 * time.Second
	s := f.serve("--reported.source", "none", "--refresh-interval", interval.String(), "--db.timeout", "5s")
	// the baseline is taken two good refreshes after the first, however
	// long they take: goroutines, files and sessions have settled
	base := s.waitGoodRefreshes("good refreshes before the outage", 2)
	baseThreads := f.threads()
	factors := prefixed(base, "slurmdbd_fairshare_factor{")
	if len(factors) == 0 {
		t.Fatal("no factors before the outage")
	}

	f.srv.Stop()
	stopped := time.Now()
	var frozen float64
	maxG, maxFDs := base["go_goroutines"], base["process_open_fds"]
	scrapes := 0
	midFailures := -1.0 // failed refreshes counted at half the outage
	for time.Since(stopped) < faultOutage {
		time.Sleep(5 * time.Second)
		m, _ := s.scrape()
		scrapes++
		if midFailures < 0 && time.Since(stopped) >= faultOutage/2 {
			midFailures = dbFailures(m)
		}
		maxG, maxFDs = max(maxG, m["go_goroutines"]), max(maxFDs, m["process_open_fds"])
		if time.Since(stopped) < interval+time.Second {
			continue // a refresh may have begun before the stop
		}
		if m[upDB] != 0 {
			t.Fatalf("up{db} %v %v after MariaDB stopped", m[upDB], time.Since(stopped))
		}
		if frozen == 0 {
			frozen = m[lastDB]
		}
		if m[lastDB] != frozen || frozen > float64(stopped.Unix()+1) {
			t.Fatalf("last success %v moved or is after the stop (%v, first seen down %v)", m[lastDB], stopped.Unix(), frozen)
		}
		for k, v := range factors {
			if m[k] != v {
				t.Fatalf("%s: %v during the outage, %v before", k, m[k], v)
			}
		}
	}
	down, _ := s.scrape()
	failures := dbFailures(down) - dbFailures(base)
	// refreshes kept being tried all through the outage: failures were
	// still counted in its second half, and at least a fifth of the ticks
	// failed (how many of them a loaded machine runs is its own affair)
	if failures < float64(faultOutage/interval)/5 || dbFailures(down) <= midFailures {
		t.Errorf("%v failed refreshes counted in %v of outage, %v of them in its second half", failures, faultOutage, dbFailures(down)-midFailures)
	}

	f.srv.Restart()
	back := time.Now()
	atBack, _ := s.scrape()
	m := s.waitScrape("recovery after MariaDB came back", 30*time.Second, func(m map[string]float64) bool { return m[upDB] == 1 && m[lastDB] > frozen })
	recovered := time.Since(back)
	// within one refresh, counted in refreshes, not seconds: at most the
	// one under way as MariaDB came back failed
	if n := dbFailures(m) - dbFailures(atBack); n > 1 {
		t.Errorf("%v refreshes failed after MariaDB came back (recovered after %v): expected it back within one refresh", n, recovered)
	}
	// goroutines, open files and server sessions back at their baseline,
	// however many refreshes that takes; judged at the last look
	settled := func(after map[string]float64, threads int) bool {
		return after["go_goroutines"] <= base["go_goroutines"]+2 && after["process_open_fds"] <= base["process_open_fds"]+1 && threads <= max(baseThreads, 2)
	}
	var threads int
	after, _, _ := s.scrapeUntil(30*time.Second, interval, func(m map[string]float64) bool {
		threads = f.threads()
		return settled(m, threads)
	})
	t.Logf("outage %v, %d scrapes, %v failed refreshes counted; recovered %v after MariaDB answered", faultOutage, scrapes, failures, recovered.Round(time.Millisecond))
	t.Logf("goroutines: %v before, at most %v during, %v after; open files: %v, %v, %v; server sessions: %d before, %d after",
		base["go_goroutines"], maxG, after["go_goroutines"], base["process_open_fds"], maxFDs, after["process_open_fds"], baseThreads, threads)
	// The pool keeps up to two idle connections, each with a goroutine of
	// the driver's: the counts may differ by one idle connection's worth.
	if after["go_goroutines"] > base["go_goroutines"]+2 || maxG > base["go_goroutines"]+4 {
		t.Errorf("goroutines: %v before, %v at most during, %v after", base["go_goroutines"], maxG, after["go_goroutines"])
	}
	if after["process_open_fds"] > base["process_open_fds"]+1 || maxFDs > base["process_open_fds"]+2 {
		t.Errorf("open files: %v before, %v at most during, %v after", base["process_open_fds"], maxFDs, after["process_open_fds"])
	}
	if threads > max(baseThreads, 2) {
		t.Errorf("server sessions: %d before, %d after", baseThreads, threads)
	}
}

// TestFaultReportedHang: slurmctld down and sshare hanging (a stand-in
// that sleeps, with a child, as a wrapper script would). Each read is cut
// at --reported.timeout, sshare and its child are killed and reaped, and
// the failure is counted; up{source="reported"} goes to 0 at the first
// failure, the reported values and their drift are withdrawn once the last
// good report is --reported.stale-intervals old, and the source's age
// keeps rising, so that the source-down alert fires instead of drift
// alerts resolving. sshare answering again brings everything back.
func TestFaultReportedHang(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	capture, err := filepath.Abs(filepath.Join("..", "testdata", "slurm-24.11", "sshare-a-l-P-m.txt"))
	if err != nil {
		t.Fatal(err)
	}
	hang, pids := filepath.Join(f.dir, "hang"), filepath.Join(f.dir, "pids")
	f.fake("sshare", fmt.Sprintf("echo sshare $$ >> %[1]s\nif [ -e %[2]s ]; then sleep 300 & echo child $! >> %[1]s; wait; fi\ncat %[3]s", pids, hang, capture))
	f.fake("scontrol", `echo "BOOT_TIME               = 2026-11-01T00:00:00"`)
	const interval, timeout, stale = 3 * time.Second, 2 * time.Second, 3
	s := f.serve("--refresh-interval", "2s", "--reported.source", "sshare", "--reported.interval", interval.String(),
		"--reported.timeout", timeout.String(), "--reported.stale-intervals", strconv.Itoa(stale))
	m := s.waitScrape("sshare read", 20*time.Second, func(m map[string]float64) bool {
		return m[upReported] == 1 && len(prefixed(m, "slurmdbd_fairshare_reported_factor{")) > 0 && len(prefixed(m, "slurmdbd_fairshare_drift_max{")) > 0
	})
	errors0 := m[errorsRep]

	f.write(hang, "")
	hung := time.Now()
	// The waits below end at what they wait for: their deadlines are at
	// least five times what it takes (at most interval+timeout, about
	// stale*interval+interval, interval+timeout), for a loaded machine.
	m = s.waitScrape("first hung read", 25*time.Second, func(m map[string]float64) bool {
		return m[errorsRep] > errors0
	})
	if m[upReported] != 0 {
		t.Errorf("up{reported} %v after a failed read", m[upReported])
	}
	// cut at the timeout, not run to sshare's end (300 s): no earlier, and
	// killing and reaping it may take a loaded machine a few seconds
	if d := m[tookReported]; d < timeout.Seconds() || d > timeout.Seconds()+10 {
		t.Errorf("a hung read took %vs: expected --reported.timeout (%v)", d, timeout)
	}
	m = s.waitScrape("reported values withdrawn", 60*time.Second, func(m map[string]float64) bool {
		return len(prefixed(m, "slurmdbd_fairshare_reported_")) == 0 && len(prefixed(m, "slurmdbd_fairshare_drift_")) == 0
	})
	withdrawn := time.Since(hung)
	if m[upReported] != 0 || m[ageReported] < float64(stale)*interval.Seconds() {
		t.Errorf("withdrawn with up{reported} %v, age %vs: expected 0 and at least %v", m[upReported], m[ageReported], stale*interval)
	}
	if len(prefixed(m, "slurmdbd_fairshare_factor{")) == 0 {
		t.Error("the database's values were withdrawn with the reported ones")
	}
	// the age is taken at each scrape: it must rise from one to a later
	m2, _, _ := s.scrapeUntil(20*time.Second, 500*time.Millisecond, func(m2 map[string]float64) bool { return m2[ageReported] > m[ageReported] })
	if m2[ageReported] <= m[ageReported] {
		t.Errorf("the reported source's age does not rise: %v then %v", m[ageReported], m2[ageReported])
	}

	os.Remove(hang)
	m = s.waitScrape("sshare back", 25*time.Second, func(m map[string]float64) bool {
		return m[upReported] == 1 && len(prefixed(m, "slurmdbd_fairshare_reported_factor{")) > 0
	})
	failed := m[errorsRep] - errors0
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	children := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		what, pid, _ := strings.Cut(l, " ")
		if what == "child" {
			children++
			if testenv.Running(pid) {
				t.Errorf("sshare's child %s still running", pid)
			}
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("sshare %s still running or not reaped", pid)
		}
	}
	// every hung run killed and counted, one failure each. How many there
	// were depends on how fast the machine ran them (the withdrawal above
	// is judged by the last good report's age, not by a count)
	if float64(children) != failed || failed < 1 {
		t.Errorf("%d hung sshare runs, %v failures counted", children, failed)
	}
	if !strings.Contains(s.logs.String(), "deadline exceeded") {
		t.Error("the log does not say why sshare failed")
	}
	t.Logf("%d hung sshare runs killed, reaped and counted; reported values withdrawn %v after sshare hung (last good report %d x %v old)", children, withdrawn.Round(100*time.Millisecond), stale, interval)
}

// TestFaultTableLock: a session holds a write lock on the association
// table. Each refresh gives up at --db.timeout, counted, and the server
// gives up too (lock_wait_timeout), so waiting sessions do not pile up
// behind the lock; once it is released the next refresh works.
func TestFaultTableLock(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	const interval, timeout = 3 * time.Second, 2 * time.Second
	// the lock is held until this many refreshes have failed behind it
	// (about 15 s), however long the machine takes to run them
	const failures = 5
	s := f.serve("--reported.source", "none", "--refresh-interval", interval.String(), "--db.timeout", timeout.String())
	m0, _ := s.scrape()

	db, err := sql.Open("mysql", f.srv.DSN("root", "", "slurm_acct_db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES v2411_last_ran_table WRITE"); err != nil { // read at every refresh (the association table is scanned only when txn_table moves)
		t.Fatal(err)
	}
	locked := time.Now()
	most := 0
	m, _, _ := s.scrapeUntil(75*time.Second, 500*time.Millisecond, func(m map[string]float64) bool {
		most = max(most, f.threads())
		return m[errorsDB]-m0[errorsDB] >= failures
	})
	held := time.Since(locked).Round(100 * time.Millisecond)
	timeouts := m[errorsDB] - m0[errorsDB]
	if m[upDB] != 0 || timeouts < failures {
		t.Errorf("lock held %v: up{db} %v, %v refreshes failed (want %d)", held, m[upDB], timeouts, failures)
	}
	if most > 2 {
		t.Errorf("%d exporter sessions on the server behind the lock: expected at most 2 (one giving up, one waiting)", most)
	}
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	unlocked := time.Now()
	s.waitScrape("refresh after the lock", 30*time.Second, func(m map[string]float64) bool {
		return m[upDB] == 1 && m[lastDB] > float64(unlocked.Unix())-1
	})
	logs := s.logs.String()
	if !strings.Contains(logs, "deadline exceeded") && !strings.Contains(logs, "Lock wait timeout") {
		t.Error("the log does not say the query timed out")
	}
	t.Logf("lock held %v: %v refreshes timed out and counted, at most %d exporter sessions on the server; recovered %v after the unlock",
		held, timeouts, most, time.Since(unlocked).Round(100*time.Millisecond))
}

// TestFaultBadData: rows a damaged or hand-edited database can hold (udex
// dropped, so that duplicates can exist). Each bad row is named in the
// log and left out; awkward but valid names are exported and read back
// exactly from the text format; everything else is still computed.
func TestFaultBadData(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	s := f.serve("--reported.source", "none", "--refresh-interval", "2s", "--collector.extended")
	before := exportedAssocs(t, s)

	long := strings.Repeat("l", 255) // tinytext holds 255 bytes
	weird := []string{`quo"te's`, "pi|pe", "new\nline", "back\\slash", "ünïcødé", long}
	sqlQuote := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(v) + "'"
	}
	var rows []string
	row := func(id int, user, acct, parent string, idParent int, lineage string, shares int) {
		rows = append(rows, fmt.Sprintf("(1795318900,1795318900,%d,%s,%s,%s,%d,%s,%d)", id, sqlQuote(user), sqlQuote(acct), sqlQuote(parent), idParent, sqlQuote(lineage), shares))
	}
	row(100, "", "orphan", "missing", 999, "/missing/orphan/", 5)
	row(101, "", "cyc1", "cyc2", 102, "/cyc2/cyc1/", 5)
	row(102, "", "cyc2", "cyc1", 101, "/cyc1/cyc2/", 5)
	row(103, "u1", "b", "", 5, "/a/b/0-u1/", 1) // u1 in b is id 10
	row(104, "", "we|ird \"acct\"", "root", 1, "/weird/", 5)
	for i, u := range weird {
		row(105+i, u, "we|ird \"acct\"", "", 104, "/weird/0-"+strconv.Itoa(i)+"/", 1)
	}
	row(120, "negshares", "b", "", 5, "/a/b/0-negshares/", -5)
	f.srv.MustSQL("SET NAMES utf8mb4; USE slurm_acct_db; ALTER TABLE v2411_assoc_table DROP INDEX udex;" +
		" INSERT INTO v2411_assoc_table (creation_time, mod_time, id_assoc, user, acct, parent_acct, id_parent, lineage, shares) VALUES " + strings.Join(rows, ",") + ";" +
		" INSERT INTO v2411_assoc_usage_hour_table (creation_time, mod_time, deleted, id, id_alt, id_tres, time_start, alloc_secs) VALUES" +
		" (1795320000,1795320000,0,11,0,1,1795298400,18446744073709551615), (1795320000,1795320000,0,12,0,9999,1795316400,5000)," +
		" (1795320000,1795320000,0,100,0,1,1795316400,7200);" +
		// logged as slurmdbd logs an administrator's change: rows written
		// behind its back are seen within 10 minutes (RecheckHours)
		" INSERT INTO txn_table (timestamp, action, name, actor, cluster) VALUES (UNIX_TIMESTAMP(), 1405, 'bad rows', 'root', 'v2411')")

	s.waitScrape("the new rows exported", 20*time.Second, func(m map[string]float64) bool {
		return len(prefixed(m, `slurmdbd_fairshare_shares{account="we|ird \"acct\""`)) > 0
	})
	logged := []string{
		`id_assoc=100 account=\"orphan\": parent id_assoc=999 does not exist`,
		`id_assoc=101 account=\"cyc1\": not reachable from root`,
		`id_assoc=102 account=\"cyc2\": not reachable from root`,
		`id_assoc=103 account=\"b\" user=\"u1\": already has row id_assoc=10`,
		`id_assoc=120 account=\"b\" user=\"negshares\": shares -5: expected 0 to 2147483647`,
		`hourly usage of id_assoc=11 id_tres=1 time_start=1795298400: alloc_secs 18446744073709551616`,
		`id_tres=9999, which tres_table does not list: exported as tres=\"tres_9999\"`,
	}
	// judged once the log names every bad row (or 30 s have passed)
	s.waitLog(30*time.Second, func(log string) bool {
		return !slices.ContainsFunc(logged, func(want string) bool { return !strings.Contains(log, want) })
	})
	m, _ := s.scrape()
	if m[upDB] != 1 {
		t.Errorf("up{db} %v: bad rows failed the refresh", m[upDB])
	}
	after := exportedAssocs(t, s)
	for k := range before {
		if !after[k] {
			t.Errorf("%s exported before the bad rows, not after", k)
		}
	}
	want := map[string]bool{`we|ird "acct"/`: true}
	for _, u := range weird {
		want[`we|ird "acct"/`+u] = true
	}
	for k := range after {
		if !before[k] && !want[k] {
			t.Errorf("%s exported: a bad row?", k)
		}
	}
	for k := range want {
		if !after[k] {
			t.Errorf("%q not exported, or not read back as written", k)
		}
	}
	for k, v := range prefixed(m, "slurmdbd_fairshare_") {
		if strings.Contains(k, "rollup_lag") {
			continue // NaN before a cluster's first rollup
		}
		if v != v {
			t.Errorf("%s %v", k, v)
		}
	}
	logs := s.logs.String()
	for _, want := range logged {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %s", want)
		}
	}
	if len(prefixed(m, `slurmdbd_fairshare_usage_tres_seconds{`)) == 0 || len(prefixed(m, `slurmdbd_fairshare_usage_tres_seconds{account="c",`)) == 0 {
		t.Error("no per-TRES usage")
	}
}

// exportedAssocs reads a scrape with the text-format parser (as Prometheus
// would) and returns "account/user" of every shares series.
func exportedAssocs(t *testing.T, s *served) map[string]bool {
	t.Helper()
	_, body := s.scrape()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing a scrape: %v", err)
	}
	out := map[string]bool{}
	for _, m := range mfs["slurmdbd_fairshare_shares"].GetMetric() {
		var acct, user string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "account":
				acct = l.GetValue()
			case "user":
				user = l.GetValue()
			}
		}
		out[acct+"/"+user] = true
	}
	if len(out) == 0 {
		t.Fatal("no associations exported")
	}
	return out
}

// TestFaultBadConfig: each bad input stops serve at startup with exit
// code 2 and a message naming it; none panics, none prints the password.
func TestFaultBadConfig(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	file := func(name, content string) string {
		p := filepath.Join(f.dir, name)
		f.write(p, content)
		return p
	}
	conf := func(extra string) string {
		b, err := os.ReadFile(f.conf)
		if err != nil {
			t.Fatal(err)
		}
		return file("slurm-"+strconv.Itoa(rand.IntN(1e9))+".conf", string(b)+extra)
	}
	base := []string{"serve", "--web.listen-address", freeAddr(t)}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no DSN", []string{"--slurm-conf", f.conf}, "no database DSN: expected --dsn-file or $SLURMDBD_EXPORTER_DSN"},
		{"DSN file missing", []string{"--slurm-conf", f.conf, "--dsn-file", "/nonexistent/dsn"}, "--dsn-file: stat /nonexistent/dsn"},
		{"DSN file a directory", []string{"--slurm-conf", f.conf, "--dsn-file", f.dir}, "--dsn-file " + f.dir + ": expected a regular file"},
		{"DSN file of two lines", []string{"--slurm-conf", f.conf, "--dsn-file", file("two-lines", "exporter:"+f.secret+"@tcp(127.0.0.1:1)/\nslurm_acct_db\n")}, "has more than one line: expected one line holding a DSN"},
		{"DSN file empty", []string{"--slurm-conf", f.conf, "--dsn-file", file("empty", "\n")}, "is empty: expected a DSN"},
		{"DSN not a DSN", []string{"--slurm-conf", f.conf, "--dsn-file", file("bad-dsn", "exporter:"+f.secret+"@127.0.0.1/slurm_acct_db")}, "database DSN: not a valid go-sql-driver/mysql DSN"},
		{"DSN without database", []string{"--slurm-conf", f.conf, "--dsn-file", file("no-db", "exporter:"+f.secret+"@tcp(127.0.0.1:1)/")}, "no database name"},
		{"slurm.conf missing", []string{"--dsn-file", f.dsnFile, "--slurm-conf", "/nonexistent/slurm.conf"}, "/nonexistent/slurm.conf"},
		{"unknown PriorityFlags", []string{"--dsn-file", f.dsnFile, "--slurm-conf", conf("PriorityFlags=FAIR_TREE,BOGUS\n")}, `PriorityFlags=FAIR_TREE,BOGUS: unknown flag "BOGUS"`},
		{"half-life syntax", []string{"--dsn-file", f.dsnFile, "--slurm-conf", conf("PriorityDecayHalfLife=7-xx\n")}, "PriorityDecayHalfLife=7-xx: expected a time like"},
		{"unknown cluster", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--cluster", "nope"}, `--cluster: cluster "nope" is not in cluster_table: expected one of [v2411]`},
		{"web config missing", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--web.config.file", "/nonexistent/web.yml"}, "/nonexistent/web.yml"},
		{"web config bad", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--web.config.file", file("web.yml", "tls_server_config:\n  cert_file: /nonexistent/cert.pem\n")}, "web.yml"},
		{"storage path missing", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--storage.path", "/nonexistent/state"}, "--storage.path /nonexistent/state: expected a directory the exporter can write"},
		{"bad duration", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--refresh-interval", "5x"}, "--refresh-interval"},
		{"negative duration", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--db.timeout=-1s"}, "--db.timeout -1s: expected a positive duration"},
		{"negative association limit", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--collector.max-associations=-1"}, "--collector.max-associations -1: expected a count >= 0"},
		{"config file key unknown", []string{"--config.file", file("config.json", `{"listen-address": ":1"}`)}, `unknown key "listen-address"`},
		{"bad regexp", []string{"--dsn-file", f.dsnFile, "--slurm-conf", f.conf, "--collector.account-include", "("}, "--collector.account-include"},
		{"config file missing", []string{"--config.file", "/nonexistent/config.json"}, "/nonexistent/config.json"},
		{"unknown flag", []string{"--no-such-flag"}, "unknown flag --no-such-flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, exporter, append(base, tc.args...)...)
			var env []string
			for _, kv := range f.env() {
				if !strings.HasPrefix(kv, "SLURMDBD_EXPORTER_") {
					env = append(env, kv)
				}
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if ctx.Err() != nil || code != 2 || !bytes.Contains(out, []byte(tc.want)) {
				t.Errorf("exit %d (want 2), output does not say %q:\n%s", code, tc.want, out)
			}
			if bytes.Contains(out, []byte("panic")) || bytes.Contains(out, []byte("goroutine ")) {
				t.Errorf("a panic:\n%s", out)
			}
			if bytes.Contains(out, []byte(f.secret)) {
				t.Errorf("the DSN password is in the output:\n%s", out)
			}
		})
	}
}

// TestFaultWrongPassword: a wrong password is a database that does not
// answer, not a configuration error (grants can change under a running
// exporter): serve starts, reports up 0, and its log says why without
// the password.
func TestFaultWrongPassword(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	wrong := "wrong" + f.secret
	f.write(f.dsnFile, f.srv.DSN("exporter", wrong, "slurm_acct_db"))
	f.secret = wrong
	s := f.serveUntil("/-/healthy", "--reported.source", "none", "--refresh-interval", "1s")
	// judged once a refresh has failed (or 30 s have passed)
	s.waitLog(30*time.Second, func(log string) bool { return strings.Contains(log, "Access denied for user 'exporter'") })
	m, _ := s.scrape()
	if m[upDB] != 0 || !strings.Contains(s.logs.String(), "Access denied for user 'exporter'") {
		t.Errorf("up{db} %v; log:\n%s", m[upDB], s.logs.String())
	}
}

// TestFaultSavedUsage: with --storage.path the exporter saves each
// cluster's frozen usage after its first refresh; a restarted one restores
// it, says so, reads no whole history, and exports the same usage as one
// started without it. A state file that is not one is named in a warning,
// the whole history is read as without it, and the file is replaced.
func TestFaultSavedUsage(t *testing.T) {
	f := newFaultEnv(t)
	// a 7-day half-life: the capture's rollups of a day ago still count
	f.write(f.conf, "ClusterName=v2411\nPriorityType=priority/multifactor\nPriorityDecayHalfLife=7-0\nPriorityCalcPeriod=1\n")
	// a day of hours before the capture's, below the re-read window: what
	// the frozen sums hold
	var rows []string
	for h := int64(7); h <= 30; h++ {
		start := int64(1795320000) - h*3600 // the capture's last rollup
		rows = append(rows, fmt.Sprintf("(%d,%d,0,10,0,5,%d,%d)", start+3600, start+3600, start, 1000*h))
	}
	f.srv.MustSQL("USE slurm_acct_db; INSERT INTO v2411_assoc_usage_hour_table VALUES " + strings.Join(rows, ","))
	store := t.TempDir()
	args := []string{"--reported.source", "none", "--refresh-interval", "2s"}
	file := filepath.Join(store, "v2411.usage")
	first := f.serve(append(args, "--storage.path", store)...)
	first.waitScrape("the state file", 30*time.Second, func(map[string]float64) bool { _, err := os.Stat(file); return err == nil })

	restarted := f.serve(append(args, "--storage.path", store)...)
	fresh := f.serve(args...)
	usage := func(s *served) map[string]float64 {
		return prefixed(s.waitScrape("usage", 30*time.Second, func(m map[string]float64) bool {
			return len(prefixed(m, "slurmdbd_fairshare_usage_billing_seconds{")) > 0
		}), "slurmdbd_fairshare_usage_billing_seconds{")
	}
	got, want := usage(restarted), usage(fresh)
	nonzero := 0
	for k, w := range want {
		if g := got[k]; math.Abs(g-w) > 1e-4*w+1e-9 {
			t.Errorf("%s: restored %v, read whole %v", k, g, w)
		}
		if w > 0 {
			nonzero++
		}
	}
	if len(got) != len(want) || nonzero == 0 {
		t.Errorf("%d series restored, %d read whole, %d of them non-zero", len(got), len(want), nonzero)
	}
	logs := restarted.logs.String()
	if !strings.Contains(logs, "saved usage restored") || strings.Contains(logs, "did not hold") {
		t.Errorf("the restarted exporter does not say it restored saved usage, or says it did not hold")
	}

	f.write(file, "not a state\n")
	again := f.serve(append(args, "--storage.path", store)...)
	again.waitScrape("the state file replaced", 30*time.Second, func(map[string]float64) bool {
		b, err := os.ReadFile(file)
		return err == nil && !bytes.Equal(b, []byte("not a state\n"))
	})
	if logs := again.logs.String(); !strings.Contains(logs, "saved usage not used: reading the whole history") || !strings.Contains(logs, file) {
		t.Errorf("a state file that is not one: no warning naming it")
	}
	if got := usage(again); len(got) != len(want) {
		t.Errorf("after a bad state file: %d usage series, want %d", len(got), len(want))
	}
}
