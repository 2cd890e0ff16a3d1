package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// httpClient makes every HTTP request of these tests: a request that
// hangs fails after 30 s (in a poll, a "not yet") instead of holding the
// test until go test's own timeout.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// served is a running `slurmdbd_exporter serve`.
type served struct {
	t    testing.TB
	url  string
	cmd  *exec.Cmd
	logs *bytes.Buffer
	// secret, when set, must appear in no scrape and in no log line.
	secret string
	once   sync.Once
}

// stop interrupts the exporter and waits until it exits (10 s at most);
// the test's cleanup calls it too.
func (s *served) stop() {
	s.once.Do(func() {
		s.cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- s.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			s.t.Error("serve did not stop within 10 s of SIGINT")
		}
	})
}

// startServe runs the built binary with args and waits for /-/ready.
func startServe(t testing.TB, env []string, args ...string) *served {
	t.Helper()
	return startServeUntil(t, "/-/ready", env, args...)
}

// startServeUntil runs the built binary with args and waits until path
// answers 200.
func startServeUntil(t testing.TB, path string, env []string, args ...string) *served {
	t.Helper()
	return startBinary(t, exporter, path, env, args...)
}

// startBinary is startServeUntil with bin for the binary (another
// build's, for TestSameOutput).
func startBinary(t testing.TB, bin, path string, env []string, args ...string) *served {
	t.Helper()
	addr := freeAddr(t)
	s := &served{t: t, url: "http://" + addr, logs: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, append([]string{"serve", "--web.listen-address", addr, "--log.format", "json", "--log.level", "debug"}, args...)...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		if s.secret != "" && bytes.Contains(s.logs.Bytes(), []byte(s.secret)) {
			t.Error("the DSN password is in the exporter's log")
		}
		if t.Failed() {
			t.Logf("exporter log:\n%s", testenv.Tail(s.logs.Bytes()))
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := httpClient.Get(s.url + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 90 s (last: %v)\n%s", err, testenv.Tail(s.logs.Bytes()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape returns every sample by its series, name{labels} with labels
// sorted as the text format writes them.
func (s *served) scrape() (map[string]float64, []byte) {
	s.t.Helper()
	m, body, err := s.tryScrape()
	if err != nil {
		s.t.Fatalf("scrape: %v", err)
	}
	return m, body
}

// tryScrape is scrape that returns a request that failed (no answer within
// httpClient's timeout, or not 200) for a poll to try again; what a scrape
// holds is judged as by scrape.
func (s *served) tryScrape() (map[string]float64, []byte, error) {
	s.t.Helper()
	resp, err := httpClient.Get(s.url + "/metrics")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return nil, nil, fmt.Errorf("status %d, %v", resp.StatusCode, err)
	}
	if s.secret != "" && bytes.Contains(body, []byte(s.secret)) {
		s.t.Fatal("the DSN password is in a scrape")
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			s.t.Fatalf("scrape: line %q: %v", l, err)
		}
		m[l[:i]] = v
	}
	return m, body, nil
}

// waitLog reads the exporter's log until ok holds of it, for at most d,
// and reports whether it did.
func (s *served) waitLog(d time.Duration, ok func(log string) bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if ok(s.logs.String()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// series names a sample: series("up", "source", "db").
// lossesTotal is the usage loss detector's counter.
const lossesTotal = "slurmdbd_fairshare_usage_losses_total"

func series(name string, kv ...string) string {
	type pair struct{ k, v string }
	var ps []pair
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, pair{kv[i], kv[i+1]})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].k < ps[j].k })
	var b strings.Builder
	b.WriteString(name)
	if len(ps) > 0 {
		b.WriteByte('{')
		for i, p := range ps {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", p.k, p.v)
		}
		b.WriteByte('}')
	}
	return b.String()
}

// driftBeyond sums, per kind, the associations beyond tolerance, and lists
// the values that have any.
func driftBeyond(m map[string]float64, cluster string) (formula, usage float64, which []string) {
	for k, v := range m {
		if !strings.HasPrefix(k, "slurmdbd_fairshare_drift_beyond_tolerance_associations{") || !strings.Contains(k, `slurm_cluster="`+cluster+`"`) {
			continue
		}
		if strings.Contains(k, `kind="formula"`) {
			formula += v
		} else {
			usage += v
		}
		if v > 0 {
			which = append(which, fmt.Sprintf("%s=%v", k, v))
		}
	}
	sort.Strings(which)
	return formula, usage, which
}

// driftBounds lists the bounds the drift is judged against, as maxDrift.
func driftBounds(m map[string]float64, cluster string) []string {
	return nonZero(m, cluster, "slurmdbd_fairshare_drift_bound")
}

func maxDrift(m map[string]float64, cluster string) []string {
	return nonZero(m, cluster, "slurmdbd_fairshare_drift_max")
}

// nonZero lists the cluster's samples of metric that are not 0, sorted.
func nonZero(m map[string]float64, cluster, metric string) []string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, metric+"{") && strings.Contains(k, `slurm_cluster="`+cluster+`"`) && v != 0 {
			out = append(out, fmt.Sprintf("%s %g", strings.TrimPrefix(k, metric), v))
		}
	}
	sort.Strings(out)
	return out
}

// usagePairs lists each association's computed and reported usage.
func usagePairs(m map[string]float64, cluster string) []string {
	const computed, reported = "slurmdbd_fairshare_usage_billing_seconds{", "slurmdbd_fairshare_reported_usage_billing_seconds{"
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, computed) && strings.Contains(k, `slurm_cluster="`+cluster+`"`) {
			labels := strings.TrimPrefix(k, computed)
			out = append(out, fmt.Sprintf("{%s %.0f %.0f", labels, v, m[reported+labels]))
		}
	}
	sort.Strings(out)
	return out
}

// scrapeUntil scrapes every `every` until ok holds of a scrape or d
// passes; a scrape that fails is not yet. It returns the last scrape that
// answered, whether ok held of it, and the last scrape's error.
func (s *served) scrapeUntil(d, every time.Duration, ok func(map[string]float64) bool) (last map[string]float64, held bool, err error) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		var m map[string]float64
		if m, _, err = s.tryScrape(); err == nil {
			if last = m; ok(m) {
				return m, true, nil
			}
		}
		if time.Now().After(deadline) {
			return last, false, err
		}
		time.Sleep(every)
	}
}

// waitScrape scrapes until ok holds or d passes, and fails the test then.
func (s *served) waitScrape(what string, d time.Duration, ok func(map[string]float64) bool) map[string]float64 {
	s.t.Helper()
	m, held, err := s.scrapeUntil(d, 2*time.Second, ok)
	if !held {
		s.t.Fatalf("%s: not within %v (last scrape: %v)\n%s", what, d, err, testenv.Tail(s.logs.Bytes()))
	}
	return m
}

// waitGoodRefreshes waits for a good refresh of the database and n more
// after it (the last success moves each time), and returns the last
// scrape: what a refresh leaves behind has settled.
func (s *served) waitGoodRefreshes(what string, n int) map[string]float64 {
	s.t.Helper()
	m := s.waitScrape(what, 30*time.Second, func(m map[string]float64) bool { return m[upDB] == 1 && m[lastDB] > 0 })
	for range n {
		prev := m[lastDB]
		m = s.waitScrape(what, 30*time.Second, func(m map[string]float64) bool { return m[upDB] == 1 && m[lastDB] > prev })
	}
	return m
}

// TestServeRealSlurm runs the built exporter against real Slurm 22.05 and
// MariaDB, the state file hidden from it (it infers the decay-pass phase
// from sshare): a healthy mixed workload from the cluster's first minutes
// (soakWorkload, 10 minutes; make soak: 60) raises no drift beyond its
// bounds at any scrape and no alert in Prometheus, check in database mode
// exits 0 and sprio lies in explain --job's ranges; then real faults raise
// the drift they should: PriorityFlags switched by scontrol reconfigure
// without a restart (formula drift and the applied algorithm), RawUsage=0
// set by sacctmgr and slurmctld killed without saving and back from its
// checkpoint (usage drift and losses, killFault); TRESBillingWeights edited and not loaded (billingFault); MariaDB stopped: the last good values stay served,
// up{source="db"} is 0 and the last success frozen, and it recovers within
// one refresh. make test runs it as TestReleasesLive/22.05, beside the
// other releases.
func TestServeRealSlurm(t *testing.T) { serveRealSlurm(t) }

func serveRealSlurm(t *testing.T) {
	testenv.Require(t, []string{"promtool"}, []string{"prometheus"})
	soak := soakDuration(t)
	// slurmdbd's hourly rollup falls in the soak's first third (the
	// cluster, the exporter and Prometheus start in under a minute),
	// before the on-demand rollup and the restart: see soakWorkload
	hourAt := time.Now().Add(time.Minute + soak*3/10).Truncate(time.Minute)
	c := slurmharness.Start(t, slurmharness.Config{CPUs: 1024, Enforce: "associations,limits", HourAt: hourAt})
	loadTwoAccounts(c, "dave")
	dsnFile := readerDSNFile(t, c)
	// The exporter is not told StateSaveLocation: it infers the phase of
	// the decay passes from what sshare reports (the harness reads the
	// state file to measure how well).
	hidden := hiddenStateDir(t)
	s := startServe(t, c.Env(), "--dsn-file", dsnFile, "--slurm-conf", c.Conf, "--slurm.state-dir", hidden, "--refresh-interval", "5s")
	name := c.Name
	up := func(src string) string { return series("slurmdbd_exporter_up", "source", src) }
	prom := startPrometheus(t, strings.TrimPrefix(s.url, "http://"))

	// A healthy mixed workload from the cluster's first minutes, over an
	// on-demand rollup and a slurmctld restart (PriorityCalcPeriod is 1
	// minute): no association beyond its bound at any scrape, check and
	// explain agree with Slurm. SLURMDBD_EXPORTER_SOAK sets how long
	// (make soak).
	healthy := time.Now()
	w := startSoakWorkload(c, soak)
	t.Logf("soak of %v from %s", soak, healthy.Format(time.TimeOnly))
	var st soakStats
	billed := 0.0 // jobs whose billing serve checked, at most
	end := healthy.Add(soak)
	nextCheck := healthy.Add(2 * time.Minute)
	for time.Now().Before(end) {
		w.step(t)
		m, body := s.scrape()
		w.scraped(t, m)
		if m[up("db")] != 1 || (m[up("reported")] != 1 && !w.restarting()) {
			t.Fatalf("while jobs run: up db %v, reported %v\n%s", m[up("db")], m[up("reported")], testenv.Tail(s.logs.Bytes()))
		}
		if n := m[series(lossesTotal, "slurm_cluster", name, "kind", result.LossBetweenPasses)] + m[series(lossesTotal, "slurm_cluster", name, "kind", result.LossAcrossRestart)]; n > 0 && !w.Lost {
			t.Errorf("false alarm while jobs run: %v usage losses counted", n)
		}
		if f, u, which := driftBeyond(m, name); f+u > 0 && w.Lost {
			t.Logf("drift after slurmctld lost its state: %v; largest drifts %v", which, maxDrift(m, name))
		} else if f+u > 0 {
			t.Errorf("false alarm while jobs run: %v; largest drifts %v, bounds %v; usage (computed at the last refresh, reported) %v\n%s",
				which, maxDrift(m, name), driftBounds(m, name), usagePairs(m, name), testenv.Tail(s.logs.Bytes()))
		}
		billed = max(billed, billingQuiet(t, m, name))
		if st.scrapes == 0 {
			promtool(t, body)
		}
		truth := trueLastPass(c)
		if !w.phaseComparable(m) {
			// the report a scrape shows may come from before the restart,
			// which started passes at a new phase: not comparable
			truth = time.Time{}
		}
		st.record(m, name, truth, time.Minute)
		if time.Now().After(nextCheck) {
			hiddenCheck(t, c, dsnFile, hidden, w.Lost)
			checkSprioRanges(t, c, dsnFile, hidden, w.Pending)
			nextCheck = time.Now().Add(3 * time.Minute)
		}
		time.Sleep(10 * time.Second)
	}
	// a soak that ended before serve showed a report read after the
	// restart: as in the loop, within 5 minutes of it
	for w.restarting() {
		time.Sleep(2 * time.Second)
		m, _ := s.scrape()
		w.scraped(t, m)
	}
	st.report(t)
	if billed == 0 {
		t.Errorf("soak: serve checked the billing of no job")
	}
	// slurmctld keeps finished jobs MinJobAge (300 s) and sends their ends
	// again after a restart: those from before the rollup rewind it
	if resent := w.Restarted.Add(-300 * time.Second); w.rewound.IsZero() && hourAt.After(healthy) && hourAt.Before(w.Restarted) && hourAt.After(resent) {
		t.Errorf("soak: slurmdbd did not rewind last_ran after the restart at %s (rollup at %s): the soak no longer covers a rewound hour",
			w.Restarted.Format(time.TimeOnly), hourAt.Format(time.TimeOnly))
	}
	if len(st.phaseErr) == 0 {
		t.Errorf("the pass phase was never inferred over %v", soak)
	}
	for _, u := range st.understated {
		t.Errorf("phase inferred with too small an uncertainty: %s", u)
	}
	m, _ := s.scrape()
	// Prometheus evaluated the shipped rules (with `for:` in seconds) every
	// 2 s all along: not one alert, not even pending.
	var restartAlerts []string
	seen := slices.DeleteFunc(prom.alertsSince(healthy), func(a string) bool {
		// The fast rules read `for:` in seconds over windows still in
		// minutes: the few seconds slurmctld's restart takes stand for
		// minutes (ReportedSourceDown), and one failed read stays in the
		// 15-minute window of ExporterRefreshFailing for longer than its
		// 15 s. Neither is about drift, and neither would fire with the
		// shipped rules.
		if strings.HasPrefix(a, "ReportedSourceDown") || strings.HasPrefix(a, "ExporterRefreshFailing") {
			restartAlerts = append(restartAlerts, a)
			return true
		}
		return false
	})
	if len(seen) > 0 && !w.Lost {
		t.Errorf("healthy run with jobs: Prometheus saw alerts %v", seen)
	}
	t.Logf("soak: alerts seen %v; of the restart's few seconds without a report, under rules read in seconds: %v", seen, restartAlerts)
	// a real install, default flags: every bundled panel has data, as
	// on the demo (TestDashboards)
	// (panels that say they may be empty on a healthy cluster may be)
	checked, problems := checkDashboards(t, prom.url, readDashboards(t, "../dashboards"), time.Now(), func(string) bool { return true })
	for _, p := range problems {
		t.Errorf("dashboards on real Slurm: %s", p)
	}
	t.Logf("dashboards on real Slurm: %d panel queries", len(checked))
	if m[series("slurmdbd_fairshare_reported_usage_billing_seconds", "slurm_cluster", name, "account", "phys", "user", "alice", "partition", "", "parent", "phys")] <= 0 {
		t.Errorf("no reported usage for alice after %v of her job", soak)
	}

	checkExplain(t, c, dsnFile, hidden)

	// (a) PriorityFlags switched without a restart: slurmctld goes on from
	// Fair Tree's sibling-normalized shares.
	c.SetPriorityFlags("NO_FAIR_TREE")
	c.MustRun("scontrol", "reconfigure")
	// The waits below end at what they wait for, in a pass or two; their
	// deadlines are for a loaded machine.
	m = s.waitScrape("formula drift after scontrol reconfigure", 10*time.Minute, func(m map[string]float64) bool {
		f, _, _ := driftBeyond(m, name)
		return f > 0
	})
	_, _, which := driftBeyond(m, name)
	t.Logf("flags changed without restart: %v; largest drifts %v", which, maxDrift(m, name))
	if v, ok := m[series("slurmdbd_fairshare_algorithm_mismatch", "slurm_cluster", name, "configured", "classic", "applied", "fair_tree")]; !ok || v != 1 {
		t.Errorf("applied algorithm not reported as fair_tree against classic configured")
	}
	as := prom.waitAlerts("FairshareDriftHigh and PriorityConfigMismatch firing", 2*time.Minute, func(as []promAlert) bool {
		f := firing(as)
		return f["FairshareDriftHigh"] && f["PriorityConfigMismatch"]
	})
	t.Logf("Prometheus after scontrol reconfigure: %s", alertList(as))
	// A restart mends it: classic, jobs still running, no alarm.
	saved := c.RestartCtld("NO_FAIR_TREE")
	s.waitScrape("formula drift gone after the restart", 10*time.Minute, func(m map[string]float64) bool {
		f, _, _ := driftBeyond(m, name)
		_, mismatch := m[series("slurmdbd_fairshare_algorithm_mismatch", "slurm_cluster", name, "configured", "classic", "applied", "classic")]
		return (f == 0 || !saved) && mismatch
	})
	prom.waitAlerts("formula alerts resolved after the restart", time.Minute, func(as []promAlert) bool {
		f := firing(as)
		return !f["PriorityConfigMismatch"] && (!saved || !f["FairshareDriftHigh"] && !f["FairshareRankMismatch"])
	})
	// nothing else drifts: the restart kept the state
	m, _ = s.scrape()
	switch f, u, which := driftBeyond(m, name); {
	case !saved:
		// slurmctld found a lock held as it shut down and saved nothing
		// (slurmharness.savedState): the usage it charged since its
		// last checkpoint is gone, a real loss, not the event this
		// step is for
		t.Logf("slurmctld saved no state on the way out: drift %v (a real loss); largest drifts %v, bounds %v", which, maxDrift(m, name), driftBounds(m, name))
	case f+u > 0:
		t.Errorf("after slurmctld's restart with its state kept: %v; largest drifts %v, bounds %v; usage %v", which, maxDrift(m, name), driftBounds(m, name), usagePairs(m, name))
	}

	// (b) RawUsage=0 on one user: usage drift on that user.
	losses := m[series(lossesTotal, "slurm_cluster", name, "kind", result.LossBetweenPasses)]
	c.Sacctmgr("modify", "user", "where", "name=alice", "account=phys", "set", "RawUsage=0")
	m = s.waitScrape("usage drift after RawUsage=0", 10*time.Minute, func(m map[string]float64) bool {
		return m[series("slurmdbd_fairshare_drift_beyond_tolerance_associations", "slurm_cluster", name, "kind", "usage", "value", "raw_usage")] > 0
	})
	_, _, which = driftBeyond(m, name)
	t.Logf("RawUsage=0 for alice: %v; largest drifts %v, bounds %v; usage %v", which, maxDrift(m, name), driftBounds(m, name), usagePairs(m, name))
	// and the loss detector, which needs no database, counts it
	s.waitScrape("the usage loss counted after RawUsage=0", 5*time.Minute, func(m map[string]float64) bool {
		return m[series(lossesTotal, "slurm_cluster", name, "kind", result.LossBetweenPasses)] > losses &&
			m[series("slurmdbd_fairshare_usage_loss_timestamp_seconds", "slurm_cluster", name, "account", "phys", "user", "alice", "partition", "", "kind", result.LossBetweenPasses)] > 0
	})
	as = prom.waitAlerts("UsageLost firing", 5*time.Minute, func(as []promAlert) bool { return firing(as)["UsageLost"] })
	t.Logf("Prometheus after RawUsage=0: %s", alertList(as))
	as = prom.waitAlerts("UsageDrift firing", 5*time.Minute, func(as []promAlert) bool { return firing(as)["UsageDrift"] })
	namesInAlert(t, as, "UsageDrift", "phys/alice")

	// (c) slurmctld killed without saving and back from its checkpoint
	// (killFault), its CPUs freed for the fault's jobs: alice's soak job
	// and the jobs pending behind it go
	c.Run("scancel", append([]string{"-u", "alice"}, w.Pending...)...)
	killFault(t, c, s)
	// for: 30 s, then a scrape and an evaluation
	as = prom.waitAlerts("UsageDrift firing", 5*time.Minute, func(as []promAlert) bool { return firing(as)["UsageDrift"] })
	t.Logf("Prometheus after slurmctld was killed: %s", alertList(as))

	// (d) TRESBillingWeights edited in slurm.conf and not loaded
	billingFault(t, c, s, prom)

	// MariaDB stopped: last good values served, db down, success frozen.
	last := series("slurmdbd_exporter_last_success_timestamp_seconds", "source", "db")
	c.DB.Stop()
	m = s.waitScrape("db down", time.Minute, func(m map[string]float64) bool { return m[up("db")] == 0 })
	frozen := m[last]
	// judged after two more failed refreshes (10 s at a 5 s interval),
	// however long the machine takes to run them
	failed0 := dbFailures(m)
	m = s.waitScrape("two more failed refreshes", 2*time.Minute, func(m map[string]float64) bool { return dbFailures(m) >= failed0+2 })
	if m[last] != frozen || m[up("db")] != 0 {
		t.Errorf("database stopped: last success moved from %v to %v, up %v", frozen, m[last], m[up("db")])
	}
	if _, ok := m[series("slurmdbd_fairshare_factor", "slurm_cluster", name, "account", "chem", "user", "carol", "partition", "", "parent", "chem", "algorithm", "classic")]; !ok {
		t.Errorf("last good values not served while the database is down")
	}
	prom.waitAlerts("SlurmdbdDown firing", time.Minute, func(as []promAlert) bool { return firing(as)["SlurmdbdDown"] })
	c.DB.Restart()
	back := time.Now()
	s.waitScrape("db back", 30*time.Second, func(m map[string]float64) bool { return m[up("db")] == 1 && m[last] > frozen })
	t.Logf("database back: up again after %v (refresh interval 5 s)", time.Since(back).Round(time.Second))
}

// promtool checks a real scrape with `promtool check metrics`.
func promtool(t *testing.T, body []byte) {
	t.Helper()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// explanation is what checkExplain reads of explain --output json.
type explanation struct {
	Path []struct {
		Account string `json:"account"`
		User    string `json:"user"`
	} `json:"path"`
	Factors  map[string]drift.Num    `json:"factors"`
	Ranges   map[string][2]drift.Num `json:"factor_ranges"`
	Phase    result.Phase            `json:"phase"`
	Reported *drift.Num              `json:"reported_factor"`
	Reason   string                  `json:"reason"`
}

// checkExplain asks why alice's priority is what it is: the path from
// root, her Fair Tree factor as slurmctld reports it, and a reason.
func checkExplain(t *testing.T, c *slurmharness.Cluster, dsnFile, stateDir string) {
	t.Helper()
	cmd := exec.Command(exporter, "explain", "--dsn-file", dsnFile, "--slurm-conf", c.Conf, "--slurm.state-dir", stateDir, "--user", "alice", "--output", "json")
	cmd.Env = c.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, stderr.String())
	}
	var exps []explanation
	if err := json.Unmarshal(out, &exps); err != nil || len(exps) != 1 {
		t.Fatalf("explain --output json: %v, %d explanations\n%s", err, len(exps), out)
	}
	x := exps[0]
	var path []string
	for _, l := range x.Path {
		path = append(path, l.Account+"/"+l.User)
	}
	if strings.Join(path, " ") != "root/ phys/ phys/alice" {
		t.Errorf("explain path %v, want root, phys, alice", path)
	}
	// sshare prints six decimals
	r := x.Ranges["fair_tree"]
	if x.Reported == nil || !(float64(*x.Reported) >= float64(r[0])-5e-7 && float64(*x.Reported) <= float64(r[1])+5e-7) || x.Reason == "" {
		t.Errorf("explain: fair_tree %v in %v (%+v), reported %v, reason %q", x.Factors["fair_tree"], r, x.Phase, x.Reported, x.Reason)
	}
	t.Logf("explain alice: %s", x.Reason)
}
