package buildtest

import (
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestDemoStages: the demo publishes every stage of a refresh, each timed
// and without errors, as a healthy exporter's first refreshes do, so
// that the health dashboard's stage panels have something to show.
func TestDemoStages(t *testing.T) {
	s := Demo(time.Now(), 400)
	for _, name := range []string{result.StageConfig, result.StageConnect, result.StageDB, result.StageExtras, result.StageReported, result.StageBuild, result.StagePublish} {
		st, ok := s.Stages[name]
		switch {
		case !ok:
			t.Errorf("no stage %s", name)
		case st.Duration <= 0 || st.Duration > time.Minute:
			t.Errorf("stage %s took %v", name, st.Duration)
		case st.Errors != 0:
			t.Errorf("stage %s: %d errors", name, st.Errors)
		}
	}
	if len(s.Stages) != 7 {
		t.Errorf("%d stages: %v", len(s.Stages), s.Stages)
	}
}

// TestDemo: the demo's lost usage is usage drift, not formula drift.
func TestDemo(t *testing.T) {
	s := Demo(time.Now(), 400)
	d := map[string]result.Drift{}
	for _, x := range s.Clusters[0].Drift {
		d[x.Kind+"/"+x.Value] = x
	}
	if d["usage/raw_usage"].Beyond == 0 || d["usage/raw_usage"].Max != 1 {
		t.Errorf("lost usage not seen: %+v", d["usage/raw_usage"])
	}
	for _, v := range []string{"norm_shares", "norm_usage", "effective_usage", "fairshare", "level_fs", "rank"} {
		if d["formula/"+v].Beyond != 0 {
			t.Errorf("formula drift on %s: %+v", v, d["formula/"+v])
		}
	}
}
