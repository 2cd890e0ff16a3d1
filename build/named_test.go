package build_test

import (
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestBuildNamesDrift: build.Build publishes the comparison's named
// associations (the demo's report has lost one user's usage), none with
// Named 0, and a loss counted after the report was first compared is
// taken as evidence at the next Build: the memo keeps no stale cause.
func TestBuildNamesDrift(t *testing.T) {
	in := buildtest.Inputs(time.Unix(1700000000, 0), 200)
	in.Reported.Memo = &build.ReportMemo{}
	in.Losses = &result.Losses{Counts: map[string]int{}}
	cl, err := build.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Named) == 0 || cl.Named[0].Value != "raw_usage" || cl.Named[0].Cause != "unexplained" || cl.Named[0].User == "" {
		t.Fatalf("named %+v, want the demo's user with lost usage first, unexplained", cl.Named)
	}
	lost := cl.Named[0]
	in.Losses = &result.Losses{Counts: map[string]int{result.LossBetweenPasses: 1},
		Last: []result.UsageLoss{{AssocKey: lost.AssocKey, Kind: result.LossBetweenPasses, At: in.Computed}}}
	if cl, err = build.Build(in); err != nil {
		t.Fatal(err)
	}
	if cl.Named[0].AssocKey != lost.AssocKey || cl.Named[0].Cause != "reset" {
		t.Errorf("after the loss was seen: %+v, want %v reset", cl.Named[0], lost.AssocKey)
	}
	in.Named, in.Reported.Memo = 0, &build.ReportMemo{}
	if cl, err = build.Build(in); err != nil {
		t.Fatal(err)
	}
	if cl.Named != nil {
		t.Errorf("Named 0: %+v", cl.Named)
	}
}
