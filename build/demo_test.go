package build

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
