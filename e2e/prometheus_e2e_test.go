package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// promServer is a real Prometheus (Debian's package) scraping one exporter
// and evaluating a copy of the bundled rules.
type promServer struct {
	t    *testing.T
	url  string
	logs *bytes.Buffer
}

// forMinutes matches the `for:` durations of rules.yml, all in minutes.
var forMinutes = regexp.MustCompile(`(?m)^(\s+for: )(\d+)m$`)

// fastRules is rules.yml with every `for:` read in seconds instead of
// minutes (15m → 15s), so that an alert's wait fits a test. The
// expressions are the shipped ones, unchanged.
func fastRules(t *testing.T) []byte {
	t.Helper()
	rules, err := os.ReadFile("../dashboards/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	all := regexp.MustCompile(`(?m)^\s+for: `).FindAll(rules, -1)
	if n := len(forMinutes.FindAll(rules, -1)); n == 0 || n != len(all) {
		t.Fatalf("rules.yml: %d `for:` durations, %d of them in whole minutes", len(all), n)
	}
	return forMinutes.ReplaceAll(rules, []byte("${1}${2}s"))
}

// startPrometheus scrapes target (host:port) every 2 s and evaluates the
// fast rules every 2 s.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	return startPrometheusRules(t, target, fastRules(t))
}

// startPrometheusRules is startPrometheus evaluating rules.
func startPrometheusRules(t *testing.T, target string, rules []byte) *promServer {
	t.Helper()
	testenv.Require(t, []string{"prometheus"}, []string{"prometheus"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: [rules.yml]
scrape_configs:
  - job_name: slurmdbd
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := &promServer{t: t, url: "http://" + addr, logs: &bytes.Buffer{}}
	cmd := exec.Command("prometheus",
		"--config.file", filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", addr)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", testenv.Tail(p.logs.Bytes()))
		}
	})
	// ready, and the target scraped once
	deadline := time.Now().Add(time.Minute)
	for {
		var r struct {
			Data struct {
				ActiveTargets []struct{ Health string } `json:"activeTargets"`
			} `json:"data"`
		}
		err := p.get("/api/v1/targets", &r)
		if err == nil && len(r.Data.ActiveTargets) == 1 && r.Data.ActiveTargets[0].Health == "up" {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: exporter not scraped within a minute (%v, %+v)", err, r.Data.ActiveTargets)
		}
		time.Sleep(time.Second)
	}
}

type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
}

// namesInAlert fails t unless a firing alert's description names the
// association (account/user): the on-call paged reads who drifts in the
// alert, as the drift dashboard's table lists them from the same series.
func namesInAlert(t *testing.T, as []promAlert, alert, assoc string) {
	t.Helper()
	var seen []string
	for _, a := range as {
		if a.Labels["alertname"] == alert && a.State == "firing" {
			if strings.Contains(a.Annotations["description"], assoc) {
				return
			}
			seen = append(seen, a.Annotations["description"])
		}
	}
	t.Errorf("%s firing without naming %s in its description: %q", alert, assoc, seen)
}

func (a promAlert) String() string {
	return fmt.Sprintf("%s{value=%q} %s", a.Labels["alertname"], a.Labels["value"], a.State)
}

func (p *promServer) get(path string, v any) error {
	resp, err := httpClient.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// alerts reads the active alerts (pending and firing) from the HTTP API,
// or returns why it could not.
func (p *promServer) alerts() ([]promAlert, error) {
	var r struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/alerts", &r); err != nil {
		return nil, fmt.Errorf("prometheus alerts: %v", err)
	}
	sort.Slice(r.Data.Alerts, func(i, j int) bool { return r.Data.Alerts[i].String() < r.Data.Alerts[j].String() })
	return r.Data.Alerts, nil
}

// firing lists the firing alerts by name.
func firing(as []promAlert) map[string]bool {
	m := map[string]bool{}
	for _, a := range as {
		if a.State == "firing" {
			m[a.Labels["alertname"]] = true
		}
	}
	return m
}

// waitAlerts reads the alerts until ok holds or d passes; a read that
// fails is not yet.
func (p *promServer) waitAlerts(what string, d time.Duration, ok func([]promAlert) bool) []promAlert {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		as, err := p.alerts()
		if err == nil && ok(as) {
			return as
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("prometheus: %s: not within %v; alerts %s (%v)", what, d, alertList(as), err)
		}
		time.Sleep(time.Second)
	}
}

func alertList(as []promAlert) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// alertsSince lists every alert that was pending or firing at any rule
// evaluation since start, read back from Prometheus' ALERTS series.
func (p *promServer) alertsSince(start time.Time) []string {
	p.t.Helper()
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	q := fmt.Sprintf("ALERTS[%ds]", int(time.Since(start).Seconds())+1)
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		p.t.Fatalf("prometheus query %s: %v", q, err)
	}
	var seen []string
	for _, s := range r.Data.Result {
		seen = append(seen, fmt.Sprintf("%s{value=%q} %s", s.Metric["alertname"], s.Metric["value"], s.Metric["alertstate"]))
	}
	sort.Strings(seen)
	return seen
}
