package collector_test

import (
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	. "github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
)

// TestBuildInfoServed: /metrics, as Serve builds it, carries
// slurmdbd_exporter_build_info 1 labelled with the version, revision and
// branch the build set (-ldflags -X on prometheus/common/version, as the
// Makefile does) and the Go release that built it; docs/metrics.md lists it.
func TestBuildInfoServed(t *testing.T) {
	saved := [3]string{version.Version, version.Revision, version.Branch}
	t.Cleanup(func() { version.Version, version.Revision, version.Branch = saved[0], saved[1], saved[2] })
	version.Version, version.Revision, version.Branch = "1.2.3-test", "abc123", "oncall"

	c := New()
	if err := c.Publish(buildtest.Demo(time.Now(), 50)); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	c.Handler(OwnRegistry()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	mf := mfs["slurmdbd_exporter_build_info"]
	if mf == nil || len(mf.GetMetric()) != 1 {
		t.Fatalf("no single slurmdbd_exporter_build_info on /metrics: %v", mf)
	}
	m := mf.GetMetric()[0]
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("build_info = %v, want 1", v)
	}
	got := model.LabelSet{}
	for _, l := range m.GetLabel() {
		got[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
	}
	for name, want := range map[model.LabelName]string{"version": "1.2.3-test", "revision": "abc123", "branch": "oncall", "goversion": runtime.Version()} {
		if string(got[name]) != want {
			t.Errorf("build_info{%s=%q}, want %q (labels %v)", name, got[name], want, got)
		}
	}
	if !strings.Contains(MetricsDoc(), "| `slurmdbd_exporter_build_info` | ") {
		t.Errorf("docs/metrics.md does not list slurmdbd_exporter_build_info")
	}
}
