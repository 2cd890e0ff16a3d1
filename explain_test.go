package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/explain"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sim"
)

// TestForecastFlags: --forecast takes an optional threshold; bad values
// name the flag and what was expected. Good ones get as far as the DSN.
func TestForecastFlags(t *testing.T) {
	t.Setenv(cli.DSNEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "u", "--forecast"}, "no database DSN"},
		{[]string{"--forecast", "0.6", "--user", "u"}, "no database DSN"},
		{[]string{"--forecast=0.6", "--user", "u"}, "no database DSN"},
		{[]string{"--forecast", "--user", "u"}, "no database DSN"},
		{[]string{"--what-if", "a=parent", "--what-if", "a/u=5"}, "no database DSN"},
		{[]string{"--user", "u", "--forecast", "2"}, "--forecast: threshold 2: expected a factor above 0 and at most 1"},
		{[]string{"--user", "u", "--forecast=x"}, `threshold "x": expected a factor`},
		{[]string{"--forecast"}, "--forecast: expected --user"},
		{[]string{"--user", "u", "--forecast", "--forecast.window=-1h"}, "--forecast.window -1h0m0s: expected a positive duration"},
		{[]string{"--user", "u", "--forecast", "--forecast.at=0s"}, "--forecast.at [0s]: expected positive durations"},
		{[]string{"--user", "u", "--forecast.at=5m"}, "--forecast.at: expected --forecast"},
		{[]string{"--user", "u", "--forecast", "--forecast.at=5m", "--forecast.at=90s"}, "no database DSN"},
		{[]string{"--what-if", "a=x"}, `--what-if "a=x": expected ACCOUNT=SHARES or ACCOUNT/USER=SHARES`},
		{[]string{"--what-if", "a/=3"}, `--what-if "a/=3": expected`},
		{[]string{"--what-if", "a=2147483647"}, `--what-if "a=2147483647": expected`},
		{[]string{"--what-if", "a=1", "--user", "u", "--forecast"}, "--forecast and --what-if: expected one of them"},
	} {
		_, _, stderr := runCLI(t, append([]string{"explain", "--slurm-conf", "/dev/null"}, c.args...)...)
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%v: %q, expected %q", c.args, stderr, c.want)
		}
	}
}

// TestExplainDemo: explain --demo answers --user with a forecast, --job and
// --what-if on serve --demo's cluster (sim), with no database or Slurm; at
// a given moment the simulation is the same every time, so the test reads
// its busiest user and a pending job from it.
func TestExplainDemo(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	sc, err := sim.New(sim.Config{Associations: cli.DemoAssociations, Speed: 1, History: sim.History, Seed: 1, Start: at})
	if err != nil {
		t.Fatal(err)
	}
	report, err := sc.Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	user, most := "", 0.0
	for _, r := range report.Rows {
		if r.User != "" && r.RawUsage > most {
			user, most = r.User, r.RawUsage
		}
	}
	pending, err := sc.PendingJobs(t.Context(), at)
	if err != nil || len(pending) == 0 {
		t.Fatalf("no pending job in the demo (%v)", err)
	}
	when := strconv.FormatInt(at.Unix(), 10)
	code, out, stderr := runCLI(t, "explain", "--demo", "--at", when, "--user", user, "--forecast", "--output", "json")
	var exps []explain.Explanation
	if err := json.Unmarshal([]byte(out), &exps); code != 0 || err != nil || len(exps) == 0 || exps[0].Forecast == nil {
		t.Fatalf("explain --demo --user %s --forecast: exit %d, %v: %s %s", user, code, err, out, stderr)
	}
	if f := exps[0].Forecast; len(f.Points) < 6 || !strings.Contains(strings.Join(f.Assumptions, " "), "running jobs") {
		t.Errorf("forecast: %d points, assumptions %q", len(f.Points), f.Assumptions)
	}
	job := strconv.Itoa(int(pending[0].ID))
	if code, out, stderr := runCLI(t, "explain", "--demo", "--at", when, "--job", job); code != 0 || !strings.Contains(out, "fairshare") {
		t.Errorf("explain --demo --job %s: exit %d: %s %s", job, code, out, stderr)
	}
	acct := exps[0].Path[len(exps[0].Path)-2].Account
	if code, out, stderr := runCLI(t, "explain", "--demo", "--what-if", acct+"=1000"); code != 0 || !strings.Contains(out, acct) {
		t.Errorf("explain --demo --what-if %s=1000: exit %d: %s %s", acct, code, out, stderr)
	}
}
