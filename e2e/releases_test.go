package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// TestReleasesLive runs the exporter against live Slurm 24.11 (Debian
// trixie) and 26.05 (Debian sid), each from a chroot beside the host's
// 22.05: database mode, a `sshare --json` report, serve on sshare and on
// slurmrestd (TCP with JWT, and its Unix socket) with the version it
// serves detected, and explain. The two clusters come up side by side:
// most of the time is spent waiting for slurmctld's passes.
func TestReleasesLive(t *testing.T) {
	for _, release := range []string{"24.11", "26.05"} {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			testRelease(t, release)
		})
	}
}

func testRelease(t *testing.T, release string) {
	begin := time.Now()
	c := slurmharness.Start(t, slurmharness.Config{Release: release, CPUs: 1024})
	t.Logf("cluster up in %v", time.Since(begin).Round(time.Second))
	loadTwoAccounts(c)
	rest := c.StartRestd()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(rest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dsnFile := readerDSNFile(t, c)
	// the state directory as the host sees it: slurm.conf names it as the
	// daemons in the chroot do
	db := []string{"--dsn-file", dsnFile, "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir()}
	ids := []string{c.Submit("alice", "phys", "", 256, 150), c.Submit("carol", "chem", "", 128, 150), c.Submit("bob", "phys", "", 96, 60)}
	c.WaitRunning(2*time.Minute, ids...)
	// New associations have FairShare 0 until slurmctld's next pass.
	c.WaitDecayPass()

	sources := map[string][]string{
		"sshare":          {"--reported.source", "sshare"},
		"slurmrestd http": {"--reported.source", "slurmrestd", "--slurmrestd.url", rest.URL, "--slurmrestd.token-file", tokenFile},
		// rest_auth/local: no token, and only as the user slurmrestd runs as
		"slurmrestd unix": {"--reported.source", "slurmrestd", "--slurmrestd.url", rest.Unix, "--slurmrestd.user", rest.User},
	}
	servers := map[string]*served{}
	for name, args := range sources {
		servers[name] = startServe(t, c.Env(), append(append(args, db...), "--refresh-interval", "5s")...)
	}
	up := func(src string) string { return series("slurmdbd_exporter_up", "source", src) }
	// what the reported side gives, else no drift would be trivially true
	aliceReported := series("slurmdbd_fairshare_reported_usage_billing_seconds", "slurm_cluster", c.Name, "account", "phys", "user", "alice", "partition", "", "parent", "phys")
	for name, s := range servers {
		s.waitScrape(name+": reported source up", 90*time.Second, func(m map[string]float64) bool { return m[up("reported")] == 1 })
	}
	// At least a minute and a pass of slurmctld's while jobs run and end.
	watched, pass := time.Now(), c.LastDecayRan()
	for passed := false; !passed || time.Since(watched) < time.Minute; passed = passed || string(c.LastDecayRan()) != string(pass) {
		for name, s := range servers {
			m, _ := s.scrape()
			if m[up("db")] != 1 || m[up("reported")] != 1 {
				t.Fatalf("%s: up db %v, reported %v", name, m[up("db")], m[up("reported")])
			}
			if f, u, which := driftBeyond(m, c.Name); f+u > 0 {
				t.Errorf("%s: drift beyond tolerance: %v; largest drifts %v; usage (computed, reported) %v", name, which, maxDrift(m, c.Name), usagePairs(m, c.Name))
			}
		}
		time.Sleep(10 * time.Second)
	}
	for name, s := range servers {
		if m, _ := s.scrape(); m[aliceReported] <= 0 {
			t.Errorf("%s: no reported usage for alice after her job ran over slurmctld's passes", name)
		}
		s.stop()
		if name != "sshare" {
			logVersion(t, name, s)
		}
	}

	code, rep, stderr := checkJSONEnv(t, c.Env(), db...)
	t.Logf("database mode: %+v, largest drift %s, note %q", rep.Summary.Counts, rep.Summary.MaxDrift.String(), rep.Note)
	if code != 0 || len(rep.Associations) == 0 {
		t.Errorf("check in database mode: exit %d, %d associations: %s", code, len(rep.Associations), stderr)
		for _, e := range rep.Associations {
			if e.Status != drift.StatusOK {
				t.Logf("%s/%s/%s: %s: computed %s, reported %s", e.Account, e.User, e.Partition, e.Status, e.Computed, e.Reported)
			}
		}
	}

	js := filepath.Join(t.TempDir(), "sshare.json")
	if err := os.WriteFile(js, []byte(c.Sshare("--json", "-a", "-l", "-m")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, rep, stderr := checkJSONEnv(t, nil, "--sshare-file", js); code == exitError || len(rep.Associations) == 0 {
		t.Errorf("check --sshare-file (sshare --json): exit %d, %d associations: %s", code, len(rep.Associations), stderr)
	} else {
		t.Logf("sshare --json replayed: exit %d, %+v", code, rep.Summary.Counts)
	}

	code, out, stderr := runExporterEnv(t, c.Env(), append([]string{"explain", "--user", "alice", "--output", "json"}, db...)...)
	var exps []explanation
	if err := json.Unmarshal([]byte(out), &exps); code != 0 || err != nil || len(exps) != 1 {
		t.Errorf("explain --user alice: exit %d, %v, %d explanations\n%s\n%s", code, err, len(exps), out, stderr)
	} else {
		t.Logf("explain alice: %s", exps[0].Reason)
	}
	t.Logf("release %s tested in %v", release, time.Since(begin).Round(time.Second))
}

// checkJSONEnv is checkJSON with env as the exporter's environment (nil:
// this process's): in a chroot release, sshare is the wrapper on its PATH.
func checkJSONEnv(t *testing.T, env []string, args ...string) (code int, rep drift.Report, stderr string) {
	t.Helper()
	code, out, stderr := runExporterEnv(t, env, append([]string{"check", "--output", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check %v exited %d: %v\n%s\n%s", args, code, err, out, stderr)
	}
	return code, rep, stderr
}

// logVersion logs the slurmrestd data_parser version serve detected.
func logVersion(t *testing.T, name string, s *served) {
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, `"api_version"`) {
			t.Logf("%s: %s", name, l)
			return
		}
	}
	t.Errorf("%s: serve logged no detected api_version", name)
}
