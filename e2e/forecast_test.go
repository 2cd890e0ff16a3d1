package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
// the state file) (judgeForecast). On 22.05 ($SLURMDBD_EXPORTER_RELEASES:
// others side by side; make record runs each: the job_table and rollups
// the forecast reads differ between them). Recording (make record), the cluster is
// captured when the forecast is made (01) and when sshare is read (02),
// and TestForecastReplay judges explain on the captures alike.
func TestForecastAgainstSshare(t *testing.T) {
	for _, release := range liveReleases() {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			forecastAgainstSshare(t, release)
		})
	}
}

// TestForecastReplay judges every recorded forecast run as
// TestForecastAgainstSshare judged it live.
func TestForecastReplay(t *testing.T) {
	t.Parallel()
	eachRun(t, "forecast", replayForecast)
}

// forecastEvent is what a recorded forecast run holds beside its two
// captures: when explain ran at each (unix seconds, started and ended).
type forecastEvent struct {
	Explained [2][2]float64 `json:"explained"`
}

// forecastAt asks explain for the forecast and its value 1 to 8 minutes on.
func forecastAt() []string {
	args := []string{"--forecast"}
	for m := 1; m <= 8; m++ {
		args = append(args, "--forecast.at", (time.Duration(m) * time.Minute).String())
	}
	return args
}

// explainAlice runs explain --user alice with args in env.
func explainAlice(t *testing.T, env []string, args ...string) forecastJSON {
	t.Helper()
	code, out, stderr := runExporterEnv(t, env, append([]string{"explain", "--user", "alice", "--output", "json"}, args...)...)
	var xs []forecastJSON
	if err := json.Unmarshal([]byte(out), &xs); code != 0 || err != nil || len(xs) != 1 {
		t.Fatalf("explain %v: exit %d, %v\n%s\n%s", args, code, err, out, stderr)
	}
	return xs[0]
}

func forecastAgainstSshare(t *testing.T, release string) {
	c := slurmharness.Start(t, slurmharness.Config{Release: release, PriorityFlags: "NO_FAIR_TREE", Enforce: "associations,limits"})
	loadTwoAccounts(c)
	inputs := []string{"--dsn-file", readerDSNFile(t, c), "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir()}
	run := filepath.Join(recordings, "forecast", release)
	if recording() {
		startRun(t, run)
	}
	var ev forecastEvent
	// explain now, noting when it ran
	explained := func(n int, extra ...string) forecastJSON {
		t.Helper()
		start := time.Now()
		x := explainAlice(t, c.Env(), append(slices.Clone(inputs), extra...)...)
		ev.Explained[n] = [2]float64{slurmharness.UnixSeconds(start), slurmharness.UnixSeconds(time.Now())}
		return x
	}

	alice := c.Submit("alice", "phys", "", 64, 120)
	carol := c.Submit("carol", "chem", "", 128, 3600, "--time=60")
	c.WaitRunning(time.Minute, alice, carol)
	c.WaitGone(4*time.Minute, alice)
	c.WaitDecayPass()
	ran := c.LastDecayRan()
	before := explained(0, forecastAt()...)
	if recording() {
		// the pass explain saw is the captured one
		c.Capture(filepath.Join(run, "01"))
		if !bytes.Equal(ran, c.LastDecayRan()) {
			t.Fatal("a decay pass fell between explain and its capture: record again")
		}
	}

	// a few passes, then sshare right after one and explain at once
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		c.WaitDecayPass()
	}
	c.WaitDecayPass()
	read := time.Now()
	var ss string
	if recording() {
		dir := filepath.Join(run, "02")
		c.Capture(dir)
		ss = readFile(t, filepath.Join(dir, slurmharness.CaptureSshare))
	} else {
		ss = c.Sshare("-a", "-l", "-P")
	}
	pass, _, err := slurmstate.LastDecayRan(c.StateDir())
	if err != nil || read.Sub(pass) > time.Minute {
		t.Fatalf("the pass sshare shows: %v (%v before the read)", err, read.Sub(pass))
	}
	after := explained(1)
	judgeForecast(t, before, after, ss, pass)
	code, out, stderr := runExporterEnv(t, c.Env(), append([]string{"explain", "--what-if", "phys=400", "--output", "json"}, inputs...)...)
	judgeWhatIf(t, code, out, stderr)
	c.MustRun("scancel", carol)
	if recording() {
		writeEvent(t, run, ev)
		replayForecast(t, replayerOn(c.DB), run)
	}
}

// replayForecast runs explain on a recorded forecast run's captures, at
// the moments it ran live, and judges it as the live run was judged.
func replayForecast(t *testing.T, r *replayer, run string) {
	t.Helper()
	var ev forecastEvent
	readEvent(t, run, &ev)
	made, read := r.load(t, filepath.Join(run, "01")), r.load(t, filepath.Join(run, "02"))
	at := func(n int) string { return fmt.Sprintf("%.6f", (ev.Explained[n][0]+ev.Explained[n][1])/2) }
	// the live explain read sshare, and so slurmctld's boot
	before := explainAlice(t, made.env(), append(append(made.inputs(), made.boot()...), append([]string{"--at", at(0)}, forecastAt()...)...)...)
	after := explainAlice(t, read.env(), append(append(read.inputs(), read.boot()...), "--at", at(1))...)
	pass, _, err := slurmstate.LastDecayRan(read.in(slurmharness.CaptureState))
	if err != nil {
		t.Fatal(err)
	}
	judgeForecast(t, before, after, readFile(t, read.in(slurmharness.CaptureSshare)), pass)
	code, out, stderr := runExporterEnv(t, read.env(), append([]string{"explain", "--what-if", "phys=400", "--output", "json", "--at", at(1)}, read.inputs()...)...)
	judgeWhatIf(t, code, out, stderr)
}

// judgeForecast fails t where alice's FairShare in sshare (ss, at the
// pass of pass) is not what explain forecast for it (before) within
// explain's own bound: the width of its factor range (every moment the
// last pass may have fallen at, job ends not yet recorded) when the
// forecast was made plus the width at the check (after), around the
// forecast for that pass and the one before (classic's one-pass lag).
func judgeForecast(t *testing.T, before, after forecastJSON, ss string, pass time.Time) {
	t.Helper()
	f := before.Forecast
	if f == nil || len(f.Points) < 9 {
		t.Fatalf("explain --forecast: no points: %+v", before)
	}
	if !strings.Contains(strings.Join(f.Assumptions, "; "), "running jobs commit") {
		t.Errorf("assumptions %q: expected the others' running jobs", f.Assumptions)
	}
	now := f.Points[0].Factor
	report, err := sshare.Parse(strings.NewReader(ss), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := math.NaN()
	for _, r := range report.Rows {
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
}

// judgeWhatIf fails t where explain --what-if phys=400 (ten times phys's
// shares) did not raise alice's classic factor (exactness:
// TestWhatIfAgainstEditedInputs).
func judgeWhatIf(t *testing.T, code int, out, stderr string) {
	t.Helper()
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
}
