package e2e

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// forecastJSON is what TestForecastAgainstSshare reads of explain's JSON.
type forecastJSON struct {
	Factors      map[string]float64    `json:"factors"`
	FactorRanges map[string][2]float64 `json:"factor_ranges"`
	Forecast     *struct {
		Assumptions []string `json:"assumptions"`
		Points      []struct {
			After  string    `json:"after"`
			At     time.Time `json:"at"`
			Factor float64   `json:"factor"`
		} `json:"points"`
	} `json:"forecast"`
}

// TestForecastAgainstSshare: after jobs by alice and carol, alice's end
// while carol's keeps running under a time limit past the check. The
// forecast explain makes right then (classic, half-life 1 h, a pass a
// minute; the rollups do not cover the window yet, so carol's running
// job is all the others' usage it can assume) is compared, a few passes
// later, with alice's FairShare in sshare, at the pass sshare shows (from
// the state file). The bound is explain's own: the width of its factor
// range (every moment the last pass may have fallen at, job ends not yet
// recorded) when the forecast was made plus the width at the check, around
// the forecast for that pass and the one before (classic's one-pass lag).
// On every release: the host's 22.05, 24.11 and 26.05 side by side (the
// job_table and rollups the forecast reads differ between them).
func TestForecastAgainstSshare(t *testing.T) {
	for _, release := range []string{"22.05", "24.11", "26.05"} {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			forecastAgainstSshare(t, release)
		})
	}
}

func forecastAgainstSshare(t *testing.T, release string) {
	c := slurmharness.Start(t, slurmharness.Config{Release: release, PriorityFlags: "NO_FAIR_TREE", Enforce: "associations,limits"})
	loadTwoAccounts(c)
	dsn := readerDSNFile(t, c)
	explain := func(extra ...string) forecastJSON {
		t.Helper()
		args := append([]string{"explain", "--user", "alice", "--output", "json", "--dsn-file", dsn, "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir()}, extra...)
		code, out, stderr := runExporterEnv(t, c.Env(), args...)
		var xs []forecastJSON
		if err := json.Unmarshal([]byte(out), &xs); code != 0 || err != nil || len(xs) != 1 {
			t.Fatalf("explain %v: exit %d, %v\n%s\n%s", extra, code, err, out, stderr)
		}
		return xs[0]
	}

	alice := c.Submit("alice", "phys", "", 64, 120)
	carol := c.Submit("carol", "chem", "", 128, 3600, "--time=60")
	c.WaitRunning(time.Minute, alice, carol)
	c.WaitGone(4*time.Minute, alice)
	c.WaitDecayPass()

	var at []string
	for m := 1; m <= 8; m++ {
		at = append(at, "--forecast.at", (time.Duration(m) * time.Minute).String())
	}
	before := explain(append([]string{"--forecast"}, at...)...)
	f := before.Forecast
	if f == nil || len(f.Points) < 9 {
		t.Fatalf("explain --forecast: no points: %+v", before)
	}
	if !strings.Contains(strings.Join(f.Assumptions, "; "), "running jobs commit") {
		t.Errorf("assumptions %q: expected the others' running jobs", f.Assumptions)
	}
	now := f.Points[0].Factor

	// a few passes, then sshare right after one and explain at once
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		c.WaitDecayPass()
	}
	c.WaitDecayPass()
	read := time.Now()
	ss, err := sshare.Parse(strings.NewReader(c.Sshare("-a", "-l", "-P")), nil)
	if err != nil {
		t.Fatal(err)
	}
	pass, _, err := slurmstate.LastDecayRan(c.StateDir())
	if err != nil || read.Sub(pass) > time.Minute {
		t.Fatalf("the pass sshare shows: %v (%v before the read)", err, read.Sub(pass))
	}
	after := explain()
	got := math.NaN()
	for _, r := range ss.Rows {
		if r.User == "alice" {
			got = r.FairShare
		}
	}
	// The forecast's value at a moment is the one at the last pass before
	// it: the point in the period from the pass sshare shows is that
	// pass's, and the point before is the pass before. Classic's user
	// values mix both (computed lazily from accounts' values made at the
	// start of the pass: docs/serve.md, classic's one-pass lag), so sshare
	// lies between the two, widened by explain's own ranges (every moment
	// the last pass may have fallen at, and job ends not yet recorded)
	// when the forecast was made and at the check.
	k := -1
	for j, p := range f.Points {
		if !p.At.Before(pass) && p.At.Before(pass.Add(time.Minute)) {
			k = j
		}
	}
	if k < 1 {
		t.Fatalf("no forecast point in the period from the pass %s: %+v", pass.Format(time.RFC3339), f.Points)
	}
	p, prev := f.Points[k], f.Points[k-1]
	width := func(x forecastJSON) float64 {
		r, ok := x.FactorRanges["classic"]
		if !ok {
			return 0
		}
		return r[1] - r[0]
	}
	bound := width(before) + width(after) + 1e-6 // sshare prints 6 digits
	lo, hi := math.Min(p.Factor, prev.Factor)-bound, math.Max(p.Factor, prev.Factor)+bound
	t.Logf("alice: factor %.6f when forecast; forecast for the pass at %s %.6f (the pass before %.6f), sshare %.6f, explain then %.6f; allowed [%.6f, %.6f] (ranges %v then, %v after)",
		now, pass.UTC().Format(time.RFC3339), p.Factor, prev.Factor, got, after.Factors["classic"], lo, hi, before.FactorRanges["classic"], after.FactorRanges["classic"])
	if math.IsNaN(got) || got < lo || got > hi {
		t.Errorf("alice's factor: sshare %.6f at the pass of %s, forecast %.6f (pass before %.6f): outside [%.6f, %.6f]", got, pass, p.Factor, prev.Factor, lo, hi)
	}
	if math.Abs(got-now) <= bound {
		t.Errorf("alice's factor moved %.2g (from %.6f to %.6f), within the bound %.2g: the check tests nothing", math.Abs(got-now), now, got, bound)
	}
	// --what-if on the same database: ten times phys's shares raise
	// alice's classic factor (exactness: TestWhatIfAgainstEditedInputs)
	code, out, stderr := runExporterEnv(t, c.Env(), "explain", "--what-if", "phys=400", "--output", "json", "--dsn-file", dsn, "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir())
	var w struct {
		Changes []struct {
			Account string  `json:"account"`
			User    string  `json:"user"`
			Before  float64 `json:"factor_before"`
			After   float64 `json:"factor_after"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &w); code != 0 || err != nil {
		t.Fatalf("explain --what-if phys=400: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	raised := false
	for _, ch := range w.Changes {
		raised = raised || ch.Account == "phys" && ch.User == "alice" && ch.After > ch.Before
	}
	if !raised {
		t.Errorf("explain --what-if phys=400: alice's factor not raised: %+v", w.Changes)
	}
	c.MustRun("scancel", carol)
}
