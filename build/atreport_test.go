package build

import (
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestShownAfter: serve's policy for a report read across a pass. A read
// that closed a bracket of that pass shows the side after it and is
// judged against the database just after it, to the phase's uncertainty;
// a read that saw no pass, or whose bracket may hold the pass before,
// shows either side: the whole period.
func TestShownAfter(t *testing.T) {
	pass := time.Unix(1_800_000_000, 0)
	in := &Inputs{Database: Database{Passes: fairshare.Passes{HalfLife: 3600, Period: 60, Phase: float64(pass.Unix())}, Phase: result.Phase{Source: result.PhaseInferred, Uncertainty: 2 * time.Second}, Computed: pass}}
	start, end := pass.Add(-100*time.Millisecond), pass.Add(100*time.Millisecond)
	for _, tc := range []struct {
		name       string
		sawPass    bool
		prevStart  time.Duration // the read before's start, from the pass
		after      bool
		windowSecs float64
	}{
		{"closed a bracket of the pass", true, -20 * time.Second, true, 2},
		{"saw no pass", false, -20 * time.Second, false, 60},
		{"bracket from before the pass before", true, -61 * time.Second, false, 60},
	} {
		n, after := in.ShownAfter([2]time.Time{start, end}, tc.sawPass, end.Sub(pass.Add(tc.prevStart)))
		if after != tc.after {
			t.Errorf("%s: after %v, want %v", tc.name, after, tc.after)
			continue
		}
		read := &[2]time.Time{start, end}
		if after {
			if want := pass.Add(2500 * time.Millisecond); !n.After().Equal(want) {
				t.Errorf("%s: judged at %v, want %v", tc.name, n.After(), want)
			}
			read = nil
		}
		pe, phase := in.AtReport(read)
		if pe.Window != tc.windowSecs || phase.Uncertainty != time.Duration(tc.windowSecs*float64(time.Second)) {
			t.Errorf("%s: window %v s, phase ±%v, want %v s", tc.name, pe.Window, phase.Uncertainty, tc.windowSecs)
		}
	}
}

// TestMissedPasses: slurmctld's state file says its last pass was four
// periods before the read (down, or back and not yet at its first pass):
// the pass error spans the whole time since, which its jobs ran and its
// usage stood undecayed in its report; a read within a period of the
// last pass keeps the phase's uncertainty, as does an inferred phase.
func TestMissedPasses(t *testing.T) {
	last := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name   string
		source string
		after  time.Duration
		want   float64
	}{
		{"down for four periods", result.PhaseStateFile, 250 * time.Second, 250},
		{"within a period", result.PhaseStateFile, 30 * time.Second, 1},
		{"inferred", result.PhaseInferred, 250 * time.Second, 1},
	} {
		in := &Inputs{Database: Database{Passes: fairshare.Passes{HalfLife: 3600, Period: 60, Phase: float64(last.Unix())},
			Phase: result.Phase{Source: tc.source, Uncertainty: time.Second, Last: last}, Computed: last.Add(tc.after)}}
		read := &[2]time.Time{last.Add(tc.after - time.Second), last.Add(tc.after)}
		if got := in.PassError(read).Window; got != tc.want {
			t.Errorf("%s: window %v s, want %v", tc.name, got, tc.want)
		}
	}
}
