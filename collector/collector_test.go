package collector_test

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	. "github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/refresh"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

func demoCollector(t *testing.T) *Collector {
	t.Helper()
	c := New()
	if err := c.Publish(refresh.Demo(time.Now())); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLint: the exposition passes client_golang's metric lint and a
// pedantic registry (every sent metric described, consistent labels).
func TestLint(t *testing.T) {
	c := demoCollector(t)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"slurmdbd_fairshare_factor", "slurmdbd_fairshare_drift_max", "slurmdbd_exporter_up", "slurmdbd_fairshare_level_fs"} {
		if !names[want] {
			t.Errorf("no %s in the demo exposition", want)
		}
	}
}

// TestNothingPublished: before the first refresh a scrape is empty.
func TestNothingPublished(t *testing.T) {
	if n := testutil.CollectAndCount(New()); n != 0 {
		t.Errorf("%d metrics before any refresh", n)
	}
}

// TestMetricsDoc: docs/metrics.md is generated from the descriptors.
func TestMetricsDoc(t *testing.T) {
	want := MetricsDoc()
	const path = "../docs/metrics.md"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/metrics.md is stale: go test ./collector -run TestMetricsDoc -update")
	}
	if len(Metrics) != len(Descs) {
		t.Errorf("%d metrics documented, %d described", len(Metrics), len(Descs))
	}
	for _, m := range Metrics {
		if !strings.Contains(want, "`"+m.Name+"`") {
			t.Errorf("%s missing from the doc", m.Name)
		}
	}
}
