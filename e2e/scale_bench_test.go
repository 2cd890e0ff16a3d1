package e2e

import (
	"compress/gzip"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// scaleEnv reads an integer setting of BenchmarkScale.
func scaleEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkScale measures, in one run on one machine, the exporter against
// sshare on a real slurmctld 22.05 loaded with the same tree (make
// bench-scale; docs/performance.md): the generated tree
// (SCALE_ASSOCIATIONS, default 11,112; SCALE_MONTHS of rollups, default
// 12; SCALE_TRES=all rolls up cpu, node and billing, not billing alone;
// SCALE_SITE=1 shapes the jobs as a site's, memory billed by a fractional
// weight and QOS UsageFactors 2 and 0: gen.Config.Site) is written into
// the harness's database and slurmctld restarted on it, then:
//
//	(a) sshare -a -l -P, five runs
//	(b) the exporter's cold start: process start to the first scrape
//	    holding factors, on the buffer pool the generation left, a second
//	    exporter on the pool the first left, and a restart with
//	    --storage.path
//	(c) its steady refresh: the refresh stages of later refreshes
//	(d) computation only: classic and Fair Tree on the same tree
//	(e) /metrics under 50 concurrent gzip scrapers
//	(f) the exporter's peak RSS
func BenchmarkScale(b *testing.B) {
	n := scaleEnv("SCALE_ASSOCIATIONS", 11112)
	months := scaleEnv("SCALE_MONTHS", 12)
	allTRES, site := os.Getenv("SCALE_TRES") == "all", os.Getenv("SCALE_SITE") == "1"
	const depth, seed = 6, 1
	// slurmctld loads the generated tree after the generation, the
	// database still flushing: past a minute at 100k
	cfg := slurmharness.Config{HalfLife: "7-00:00:00", CtldWait: 10 * time.Minute}
	if site {
		cfg.Partitions = []string{gen.SitePartition + " TRESBillingWeights=" + gen.SiteWeights, "p2"}
	}
	c := slurmharness.Start(b, cfg)
	ctx := context.Background()
	root, err := sql.Open("mysql", c.DB.DSN("root", "", "slurm_acct_db"))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	// SchedMD asks for at least 1 GiB (slurmdbd warns below); a site with a
	// year of 100k associations gives it more
	c.DB.MustSQL("SET GLOBAL innodb_buffer_pool_size = 4294967296; SET GLOBAL innodb_flush_log_at_trx_commit = 2")
	end := time.Now().Truncate(time.Hour)
	c.StopDaemon("slurmctld")
	t0 := time.Now()
	st, err := gen.Fill(ctx, root, gen.Config{Cluster: c.Name, Associations: n, Depth: depth, Months: months, End: end, Seed: seed, JobsPerHour: 100, AllTRES: allTRES, Site: site})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("generated in %v: %+v", time.Since(t0).Round(time.Second), st)
	// slurmctld must take the tree from slurmdbd, not from its state
	for _, f := range []string{"assoc_mgr_state", "assoc_mgr_state.old", "assoc_usage", "assoc_usage.old", "qos_usage", "fed_mgr_state"} {
		os.Remove(filepath.Join(c.StateDir(), f))
	}
	c.RestartCtld("")
	// sshare grows faster than the tree: at 100k associations one run
	// takes minutes, past the harness's limit for a client
	var sshareRuns []time.Duration
	rows := 0
	for range max(1, 5*20000/max(n, 20000)) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		cmd := exec.CommandContext(ctx, "sshare", "-a", "-l", "-P")
		cmd.Env = c.Env()
		t := time.Now()
		out, err := cmd.Output()
		cancel()
		if err != nil {
			b.Fatalf("sshare -a -l -P: %v", err)
		}
		sshareRuns = append(sshareRuns, time.Since(t))
		rows = strings.Count(string(out), "\n") - 1
	}
	// sshare also prints root's own user row when it exists
	if rows < n {
		b.Fatalf("sshare printed %d associations, the database holds %d: slurmctld did not load the generated tree", rows, n)
	}
	sshareT := median(sshareRuns)
	b.Logf("sshare -a -l -P: %v (%d rows)", sshareRuns, rows)

	// (d) computation only, on the tree gen wrote
	tree := fairshare.Synthetic(n, depth, seed)
	var comp []time.Duration
	for range 20 {
		t := time.Now()
		tree.Classic(fairshare.ClassicOptions{Dampening: 1})
		tree.FairTree()
		comp = append(comp, time.Since(t))
	}

	dsnFile := readerDSNFile(b, c)
	// what MariaDB read from disk (bytes): a cold start on a pool that
	// lacks the pages waits on them
	diskRead := func() int64 {
		var name string
		var v int64
		if err := root.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_data_read'").Scan(&name, &v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	// firstFactors starts an exporter and returns how long it took to the
	// first scrape with factors and what MariaDB read from disk meanwhile
	firstFactors := func(bin string, args ...string) (time.Duration, int64, *served) {
		t0, read0 := time.Now(), diskRead()
		s := startBinary(b, bin, "/-/ready", c.Env(), append([]string{"--dsn-file", dsnFile, "--slurm-conf", c.Conf, "--log.level", "info"}, args...)...)
		for {
			if m, _ := s.scrape(); len(prefixed(m, "slurmdbd_fairshare_factor{")) > 0 {
				return time.Since(t0), diskRead() - read0, s
			}
			if time.Since(t0) > 5*time.Minute {
				b.Fatalf("no factors %v after start", time.Since(t0))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t0 = time.Now()
	// the exporter runs sshare too: allow it as long as one run took here
	timeout := max(30*time.Second, 2*slices.Max(sshareRuns)).Round(time.Second)
	factors, coldRead, s := firstFactors(exporter, "--refresh-interval", "10s", "--reported.timeout", timeout.String())
	b.Logf("first scrape with factors %v after start", factors)
	var m map[string]float64
	for {
		if m, _ = s.scrape(); m[upReported] == 1 {
			break
		}
		if time.Since(t0) > 5*time.Minute+timeout {
			b.Fatalf("no report %v after start (factors after %v)", time.Since(t0), factors)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cold := time.Since(t0)

	// (c) steady refreshes: the stage durations of twelve later refreshes
	dbT, buildT, publishT, allT := steadyRefreshes(s, 12)
	steady := median(allT)

	// (e) 50 concurrent scrapers, 20 scrapes each, gzip as Prometheus asks
	_, body := s.scrape()
	seriesN := strings.Count(string(body), "\n") - strings.Count(string(body), "\n#")
	gz := gzipLen(body)
	// three bursts, 20 s apart: one that meets a decay pass, or the
	// exporter's own sshare run, is not the only measure
	var p50s, p99s []time.Duration
	var perScrape int64
	for i := range 3 {
		if i > 0 {
			time.Sleep(20 * time.Second)
		}
		lat, n, failures := scrapeConcurrently(50, 20, func() *http.Client { return &http.Client{Transport: &http.Transport{DisableCompression: true}} },
			func(c *http.Client) (int, int64, error) { return scrapeGzip(c, s.url+"/metrics", "", "") })
		if len(failures) > 0 {
			b.Fatalf("%d of %d scrapes failed, first: %s", len(failures), len(lat), failures[0])
		}
		p50s, p99s, perScrape = append(p50s, lat[len(lat)/2]), append(p99s, lat[len(lat)*99/100]), n/int64(len(lat))
	}
	b.Logf("/metrics p50 %v, p99 %v", p50s, p99s)

	// (f) peak RSS
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}

	// (b) again, one exporter at a time, without sshare: a second first
	// start, on the buffer pool the first exporter left (InnoDB keeps pages
	// read once in its old sublist, 3/8 of the pool: at 100k most are read
	// from disk again), then a restart from what that one saved with
	// --storage.path
	s.stop()
	store := b.TempDir()
	again, againRead, w := firstFactors(exporter, "--reported.source", "none", "--storage.path", store)
	w.waitScrape("the saved usage", time.Minute, func(map[string]float64) bool {
		_, err := os.Stat(filepath.Join(store, c.Name+".usage"))
		return err == nil
	})
	w.stop()
	restart, restartRead, r := firstFactors(exporter, "--reported.source", "none", "--storage.path", store)
	r.stop()

	row := func(what string, d time.Duration, target string) {
		fmt.Printf("| %s | %v | %.0f× | %s |\n", what, d.Round(10*time.Microsecond), float64(sshareT)/float64(d), target)
	}
	fmt.Printf("\nBenchmarkScale: %d associations (%d hour, %d day, %d month rows, %d finished jobs; %d months), real slurmctld 22.05 and MariaDB on this machine\n\n",
		st.Associations, st.HourRows, st.DayRows, st.MonthRows, st.Jobs, months)
	fmt.Printf("| what | time | sshare ÷ it | target |\n|---|---|---|---|\n")
	row(fmt.Sprintf("(a) `sshare -a -l -P` (median of %d)", len(sshareRuns)), sshareT, "")
	row(fmt.Sprintf("(b) exporter cold start: start to the first scrape with factors (MariaDB read %d MB from disk)", coldRead>>20), factors, "≤ 10 s at 100k, a year")
	row("(b) exporter cold start: start to the first scrape with factors and a report", cold, "")
	row(fmt.Sprintf("(b) exporter cold start again, a second exporter on the pool the first left: start to the first scrape with factors (%d MB from disk)", againRead>>20), again, "")
	row(fmt.Sprintf("(b) exporter restart with --storage.path: start to the first scrape with factors (%d MB from disk)", restartRead>>20), restart, "")
	row("(c) steady refresh: database (median of 12)", median(dbT), "")
	row("(c) steady refresh: algorithms and drift", median(buildT), "")
	row("(c) steady refresh: render the exposition", median(publishT), "")
	row("(c) steady refresh, all stages (median of 12)", steady, "≥ 50× faster than (a); ≤ 200 ms")
	row("(c) steady refresh, all stages, slowest of 12 (a decay pass: usage changed, everything rendered)", slices.Max(allT), "")
	row("(d) computation only, classic + Fair Tree (median of 20)", median(comp), "≤ 20 ms at 100k")
	row("(e) /metrics p50, 50 concurrent scrapers × 20 (median of 3 bursts)", median(p50s), "")
	row("(e) /metrics p99, 50 concurrent scrapers × 20 (median of 3 bursts)", median(p99s), "≤ 50 ms at 11k")
	row("(e) /metrics p99, 50 concurrent scrapers × 20 (slowest of 3 bursts)", slices.Max(p99s), "")
	fmt.Printf("| (f) peak RSS | %s | | ≤ 512 MB at 100k |\n", procField(status, "VmHWM"))
	fmt.Printf("| series per scrape | %d | | |\n| bytes per scrape | %d (%d as served gzipped; %d at gzip's default level) | | |\n\n", seriesN, len(body), perScrape, gz)
	if base := os.Getenv(baseBinaryEnv); base != "" {
		againstBase(base, func(bin string) (time.Duration, []time.Duration) {
			cold, _, s := firstFactors(bin, "--reported.source", "none", "--refresh-interval", "10s")
			defer s.stop()
			_, _, _, all := steadyRefreshes(s, 12)
			return cold, all
		})
	}
	b.ReportMetric(sshareT.Seconds(), "sshare-s")
	b.ReportMetric(factors.Seconds(), "factors-s")
	b.ReportMetric(steady.Seconds(), "steady-s")
}

// steadyRefreshes are the stage durations of the next n refreshes of s:
// the database's (db and extras), build, publish and all three.
func steadyRefreshes(s *served, n int) (dbT, buildT, publishT, allT []time.Duration) {
	stage := func(m map[string]float64, name string) time.Duration {
		return time.Duration(m[series("slurmdbd_exporter_stage_duration_seconds", "stage", name)] * float64(time.Second))
	}
	m, _ := s.scrape()
	last := m[lastDB]
	for len(dbT) < n {
		time.Sleep(time.Second)
		m, _ = s.scrape()
		if ts := m[lastDB]; ts != last {
			last = ts
			time.Sleep(3 * time.Second) // let build and publish of that refresh finish
			m, _ = s.scrape()
			dbT = append(dbT, stage(m, "db")+stage(m, "extras"))
			buildT = append(buildT, stage(m, "build"))
			publishT = append(publishT, stage(m, "publish"))
			allT = append(allT, dbT[len(dbT)-1]+buildT[len(buildT)-1]+publishT[len(publishT)-1])
		}
	}
	return dbT, buildT, publishT, allT
}

// againstBase measures another build's exporter (base: make bench-scale
// BENCH_BASE=<rev>) and this tree's on the same generated cluster, alternating,
// twice each, with run: the start to the first scrape with factors, on
// the buffer pool the runs before left, and the steady refreshes. Before
// and after a change, on one machine, with one generation.
func againstBase(base string, run func(bin string) (time.Duration, []time.Duration)) {
	fmt.Printf("Before (%s) and after (this tree), alternating, on the cluster above (no sshare):\n\n| run | start to the first factors | steady refresh, all stages (median of 12) |\n|---|---|---|\n", base)
	for range 2 {
		for _, bin := range []string{base, exporter} {
			cold, all := run(bin)
			which := "after"
			if bin == base {
				which = "before"
			}
			fmt.Printf("| %s | %v | %v |\n", which, cold.Round(10*time.Millisecond), median(all).Round(10*time.Microsecond))
		}
	}
	fmt.Println()
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func gzipLen(b []byte) int {
	var w countWriter
	z := gzip.NewWriter(&w)
	z.Write(b)
	z.Close()
	return int(w)
}

type countWriter int

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }
