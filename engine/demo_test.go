package engine

import (
	"testing"
	"time"
)

// TestDemoStages: the demo publishes every stage of a refresh, each timed
// and without errors, as a healthy exporter's first refreshes do, so
// that the health dashboard's stage panels have something to show.
func TestDemoStages(t *testing.T) {
	s := Demo(time.Now(), DemoAssociations)
	for _, name := range []string{StageConfig, StageConnect, StageDB, StageExtras, StageReported, StageBuild, StagePublish} {
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
