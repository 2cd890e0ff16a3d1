package build

import (
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TestTailsByBoot: the tails of jobs that ended since
// slurmctld's boot are judged at the phase's uncertainty and passJitter,
// those before it (BootTails) at a whole period; without the boot or the
// phase, every tail at a whole period.
func TestTailsByBoot(t *testing.T) {
	in := &Inputs{Database: Database{Passes: fairshare.Passes{Period: 60}, Phase: result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second}, TailRisk: usage.TailRisk{Rate: []float64{10, 4}, Most: []float64{600, 240}}}}
	whole := in.tails()
	if len(whole) != 1 || whole[0].Window != 60 {
		t.Fatalf("boot unknown: %+v, want every tail at 60 s", whole)
	}
	in.BootTails = &usage.TailRisk{Rate: []float64{3, 0}, Most: []float64{180, 0}}
	parts := in.tails()
	if len(parts) != 2 || parts[0].Window != 2 || parts[1].Window != 60 {
		t.Fatalf("boot known: windows %+v, want 2 s since the boot, 60 s before", parts)
	}
	if parts[0].Rate[0] != 7 || parts[0].Most[0] != 420 || parts[1].Rate[0] != 3 || parts[0].Rate[1] != 4 {
		t.Errorf("split %+v", parts)
	}
	in.Phase = result.Phase{Source: result.PhaseUnknown, Uncertainty: time.Minute}
	if p := in.tails(); len(p) != 1 || p[0].Window != 60 {
		t.Errorf("phase unknown: %+v, want every tail at 60 s", p)
	}
}
