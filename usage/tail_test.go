package usage

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// TestTailLostCoversLockWait: without limits, slurmctld's decay pass stamps
// its moment, then waits for the job write lock (_decay_thread); a job that
// ends in between is found ended and never charged its last interval,
// though the database shows it running past the pass. For every job that
// ended within LockWait after a pass, tailRisk's lost covers that charge
// (slurmctld's side modelled as the job ending just before the pass), and
// not by much more; for every other job it is 0.
func TestTailLostCoversLockWait(t *testing.T) {
	p := fairshare.Passes{HalfLife: 3600, Period: 60, Phase: 17, LockWait: 2}
	in := &Inputs{Passes: p}
	r := rand.New(rand.NewPCG(1, 2))
	late := 0
	for range 5000 {
		start := int64(1_800_000_000 + r.IntN(3600))
		end := start + 1 + int64(r.IntN(600))
		in.At = float64(end) + r.Float64()*7200
		s, e := float64(start), float64(end)
		_, _, lost := in.tailRisk(Job{Start: start, End: end}, 0)
		pass := p.LastPass(e)
		if e-pass > p.LockWait || pass <= s {
			if lost != 0 {
				t.Fatalf("job %d–%d, pass %v: lost %v, want 0", start, end, pass, lost)
			}
			continue
		}
		late++
		want := p.JobUsage(s, e, in.At, 1) - p.JobUsage(s, pass-1e-6, in.At, 1)
		if want <= 0 || lost < want || lost > want*math.Pow(p.D(), -3*p.Period) {
			t.Fatalf("job %d–%d, pass %v, at %v: lost %v, the pass charged %v", start, end, pass, in.At, lost, want)
		}
	}
	if late < 50 {
		t.Fatalf("%d jobs ended within the lock wait: the test shows little", late)
	}
	in.Passes.ChargeJobEnd = true
	if _, _, lost := in.tailRisk(Job{Start: 1_800_000_000, End: 1_800_000_078}, 0); lost != 0 {
		t.Errorf("with limits (the tail charged at the job's end): lost %v, want 0", lost)
	}
}
