package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// upgradeChainEnv names the releases TestUpgradeChainLive goes through,
// the first the host's 22.05, the others built under
// $SLURMDBD_EXPORTER_SLURM_BUILDS; Slurm upgrades in place across at most
// two releases at a hop.
const upgradeChainEnv = "SLURMDBD_EXPORTER_UPGRADE_CHAIN"

const defaultUpgradeChain = "22.05 23.11 24.05 25.05 25.11 26.05"

// TestUpgradeChainLive upgrades one cluster in place through the chain of
// releases while serve, started on the first and never restarted, watches
// it with Prometheus evaluating the shipped rules (watch), and jobs run
// across each hop. At the second hop slurmctld stays down for three of its
// periods after slurmdbd converted the database, while jobs run and one
// ends. What it asks: no scrape beyond tolerance, no usage loss counted,
// no alert but those of the reported side while slurmctld is down; the
// database down for no more than a scrape or two in a row (slurmdbd's
// conversion); each user's RawUsage after a hop at least what decay leaves
// of it before (usage continuous); check in database mode exits 0 after
// each hop. Recording, each hop is captured (two passes after it) into
// testdata/recordings/upgrade, which TestUpgradeReplay judges in make
// test.
func TestUpgradeChainLive(t *testing.T) {
	chain := strings.Fields(os.Getenv(upgradeChainEnv))
	if len(chain) == 0 {
		chain = strings.Fields(defaultUpgradeChain)
	}
	if os.Getenv(slurmharness.BuildsEnv) == "" {
		testenv.SkipOrFail(t, "the upgrade chain %v needs Slurm builds of %v under $%s (<dir>/<release>/sbin/slurmctld)", chain, chain[1:], slurmharness.BuildsEnv)
	}
	c := slurmharness.Start(t, slurmharness.Config{Release: chain[0], CPUs: 1024, Enforce: "associations,limits"})
	loadTwoAccounts(c)
	db := []string{"--dsn-file", readerDSNFile(t, c), "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir(), "--slurmctld.pid-file", c.PidFile()}
	run := filepath.Join(recordings, "upgrade", strings.Join(chain, "-"))
	if recording() {
		startRun(t, run)
	}
	w := startWatch(t, c, db)
	jobs := []string{c.Submit("alice", "phys", "", 64, 120)}
	c.WaitRunning(3*time.Minute, jobs...)
	c.WaitDecayPass()
	for i, release := range chain[1:] {
		jobs = upgradeHop(t, c, w, run, db, i+1, release, jobs)
	}
	// slurmctld is down at each hop, three periods at one: the rules' `for:`
	// read in seconds (fastRules) while ExporterRefreshFailing's 15-minute
	// window stays, so the reported side's failed reads fire both
	w.alerts(t, "the last hop", "ReportedSourceDown", "ExporterRefreshFailing")
	w.end(t)
	if w.dbDown > 2 {
		t.Errorf("the database was down at %d scrapes in a row (every %v): longer than slurmdbd's conversion", w.dbDown, scrapeEvery)
	}
}

// upgradeHop upgrades c to release with jobs running across it (at hop 2
// slurmctld stays down three periods, and a job ends meanwhile), then
// judges and records the cluster two passes later. It returns the jobs it
// started, which the next hop lets end first: a job's slurmstepd speaks
// the release it started under, and slurmctld understands the two
// releases before its own alone, so jobs crossing two hops of two
// releases could not tell slurmctld they ended (slurmstepd's "Retrying
// job complete RPC", slurmctld's "protocol_version 9728 not supported"),
// which no site upgrading by the book sees.
func upgradeHop(t *testing.T, c *slurmharness.Cluster, w *watch, run string, db []string, hop int, release string, started []string) []string {
	t.Helper()
	c.WaitGone(6*time.Minute, started...)
	jobs := []string{c.Submit("alice", "phys", "", 64, 300), c.Submit("carol", "chem", "", 128, 300), c.Submit("bob", "phys", "", 32, 60)}
	c.WaitRunning(3*time.Minute, jobs...)
	down := time.Duration(0)
	if hop == 2 {
		down = 3 * c.CalcPeriod()
	}
	before, at := rawUsages(t, c), time.Now()
	from := c.Version()
	c.Upgrade(release, down)
	c.WaitDecayPass()
	c.WaitDecayPass()
	after := rawUsages(t, c)
	// the schema serve reads is the new release's by now: slurmdbd's
	// start changed it (Slurm's own history of the columns)
	m, _ := w.s.scrape()
	is := func(from, to string) string { return strconv.FormatBool(release >= from && release < to) }
	want := series("slurmdbd_schema_info", "slurm_cluster", c.Name, "lft_rgt", is("", "25.05"), "lineage", is("23.11", "~"),
		"account_flags", is("24.05", "~"), "qos_usage", is("24.11", "~"))
	if m[want] != 1 {
		t.Errorf("hop %d to %s: serve's schema %v, want %s", hop, release, prefixed(m, "slurmdbd_schema_info{"), want)
	}
	t.Logf("hop %d: %s to %s (slurmctld down %v more): RawUsage before %v, after %v", hop, from, c.Version(), down, before, after)
	// at a 1-hour half-life
	kept := math.Exp2(-time.Since(at).Hours())
	for k, v := range before {
		if after[k] < v*kept*(1-1e-6) {
			t.Errorf("hop %d to %s: %s RawUsage %v before, %v after: less than decay leaves (%v)", hop, release, k, v, after[k], v*kept)
		}
	}
	ev := siteEvent{Name: fmt.Sprintf("after hop %d to %s", hop, release), Target: 0.005, MinShare: 0.01, Jobs: siteSqueue(c)}
	if recording() {
		dir := filepath.Join(run, fmt.Sprintf("%02d-%s", hop, release))
		recordEvent(t, c, dir, ev)
	}
	code, rep, stderr := checkJSON(t, c.Env(), db...)
	ev.judge(t, code, rep, stderr)
	return jobs
}

// rawUsages is each user association's RawUsage, by account/user.
func rawUsages(t *testing.T, c *slurmharness.Cluster) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(c.Sshare("-a", "-n", "-P", "-o", "Account,User,RawUsage")), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 3 || f[1] == "" || f[1] == "root" {
			continue
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatalf("sshare line %q: %v", l, err)
		}
		out[strings.TrimSpace(f[0])+"/"+f[1]] = v
	}
	return out
}

// TestUpgradeReplay judges every recorded hop of an upgrade chain as the
// live run judged it, and that a 10% loss of each user holding 5% of
// root's usage is flagged.
func TestUpgradeReplay(t *testing.T) {
	t.Parallel()
	replayJudged(t, "upgrade")
}
