package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// demoAlerts are the alerts the demo's faults raise, by the fault that
// raises them (sim.Faults, in the order they come).
var demoAlerts = []string{"UsageDrift", "FairshareDriftHigh", "RollupStalled"}

// TestDemoAlerts runs serve --demo, faster, under a real Prometheus with
// the shipped rules (their for: read in seconds, fastRules): quiet while
// the simulated cluster is healthy, then each fault in turn (lost usage,
// a PriorityFlags change, a stalled rollup) fires its alert, which
// resolves once the fault is over; the lost usage also fires UsageLost
// and fills the last losses' table. The demo's clock runs 120 times the
// wall's (a decay pass every 2.5 s, an hour in 30 s) so that a stalled
// rollup passes RollupStalled's two hours within the fault.
//
// With SLURMDBD_EXPORTER_DEMO_LIVE=1 (make demo-alerts, part of make
// test-live) it runs the demo with default flags under the shipped rules
// as they are, their for: in minutes: about 95 minutes.
func TestDemoAlerts(t *testing.T) {
	testenv.Require(t, []string{"prometheus"}, []string{"prometheus"})
	t.Parallel() // no Slurm: beside the replays
	interval, duration := 40*time.Second, 100*time.Second
	args := []string{"--demo", "--demo.speed", "120", "--demo.fault-interval", interval.String(),
		"--demo.fault-duration", duration.String(), "--refresh-interval", "5s"}
	var rules []byte
	slack := 90 * time.Second
	if os.Getenv("SLURMDBD_EXPORTER_DEMO_LIVE") != "" {
		interval, duration, args, slack = 15*time.Minute, 40*time.Minute, []string{"--demo"}, 20*time.Minute
		var err error
		if rules, err = os.ReadFile("../dashboards/prometheus/rules.yml"); err != nil {
			t.Fatal(err)
		}
	} else {
		rules = fastRules(t)
	}
	start := time.Now()
	s := startServe(t, os.Environ(), args...)
	p := startPrometheusRules(t, strings.TrimPrefix(s.url, "http://"), rules)
	waitEvaluated(t, p)
	time.Sleep(time.Until(start.Add(interval - 5*time.Second)))
	if seen := p.alertsSince(start); len(seen) > 0 {
		t.Errorf("healthy demo: Prometheus saw alerts %v", seen)
	}
	fired, resolved := map[string]bool{}, map[string]bool{}
	deadline := start.Add(time.Duration(len(demoAlerts))*interval + duration + slack)
	for len(resolved) < len(demoAlerts) && time.Now().Before(deadline) {
		as, err := p.alerts()
		if err != nil {
			t.Fatal(err)
		}
		on := firing(as)
		for _, a := range as {
			on[a.Labels["alertname"]] = on[a.Labels["alertname"]] || a.State == "pending"
		}
		for _, name := range append(slices.Clone(demoAlerts), "UsageLost") {
			if firing(as)[name] && !fired[name] {
				fired[name] = true
				t.Logf("%s fired %v after the start", name, time.Since(start).Round(time.Second))
			}
			if fired[name] && !on[name] && !resolved[name] && name != "UsageLost" {
				resolved[name] = true
				t.Logf("%s resolved %v after the start", name, time.Since(start).Round(time.Second))
			}
		}
		time.Sleep(time.Second)
	}
	for _, name := range demoAlerts {
		if !fired[name] || !resolved[name] {
			t.Errorf("%s: fired %v, resolved %v within %v", name, fired[name], resolved[name], deadline.Sub(start).Round(time.Second))
		}
	}
	// UsageLost's increase over an hour stays above 0 for the hour
	if !fired["UsageLost"] {
		t.Error("UsageLost did not fire on the lost usage")
	}
	boards := readDashboards(t, "../dashboards")
	_, problems := checkDashboards(t, p.url, boards, time.Now(), func(string) bool { return false })
	for _, pr := range problems {
		t.Errorf("after the faults, every panel has series: %s", pr)
	}
}
