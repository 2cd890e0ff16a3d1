package usage

import (
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// TestRetimedPartialHours: a rollup row is spread over its hour, but a job
// that started or ended inside the hour charged slurmctld at its own time.
// Right after a rollup, spread, the minutes before it of a job still
// running would weigh as if at the middle of the hour: with a one-hour
// half-life 24 % below what slurmctld charged (real 22.05 in
// TestServeRealSlurm, across an hourly rollup: raw usage drift 0.26,
// falling to 0.16 as the jobs ran on). The want is slurmctld's charging pass by pass (Passes.JobUsage)
// from each job's own start; with a part of an hour before HoursFrom the
// frozen sums hold it, and it stays spread.
func TestRetimedPartialHours(t *testing.T) {
	assocs, node := oneUser()
	const h = 100 * 3600
	running := Job{Inx: 1, Assoc: 3, Start: h - 240, TRESAlloc: "1=256,5=256"}         // across the rollup at h
	ended := Job{Inx: 2, Assoc: 3, Start: h - 3000, End: h - 2900, TRESAlloc: "5=64"}  // inside the hour before
	earlier := Job{Inx: 3, Assoc: 3, Start: h - 5000, End: h - 3000, TRESAlloc: "5=8"} // across two rolled hours
	hours := []Row{
		{Assoc: 3, TRES: 5, Start: h - 3600, AllocSecs: 240*256 + 100*64 + 600*8},
		{Assoc: 3, TRES: 5, Start: h - 7200, AllocSecs: 1400 * 8},
	}
	// at a 10-minute half-life the first and last pass intervals of a
	// job weigh most: spread as one job in its hour (BucketUsage), the
	// 100-second job would be 1.7% off
	for _, hl := range []float64{3600, 600} {
		p := fairshare.Passes{HalfLife: hl, Period: 60, Phase: 17, ChargeJobEnd: true}
		for _, at := range []float64{h + 30, h + 90, h + 300} {
			want := p.JobUsage(float64(running.Start), 0, at, 256) + p.JobUsage(float64(ended.Start), float64(ended.End), at, 64)
			spread := p.BucketUsage(h-7200, h-3600, at, 1400*8) // before HoursFrom: spread
			for _, c := range []struct {
				from    float64
				earlier float64
			}{
				{0, p.JobUsage(float64(earlier.Start), float64(earlier.End), at, 8)},
				{h - 3600, spread + p.JobUsageIn(float64(earlier.Start), float64(earlier.End), h-3600, math.Inf(1), at, 8)},
			} {
				in := Inputs{Assocs: assocs, Node: node, Passes: p, At: at, LastHourly: h, Hours: hours,
					Jobs: []Job{running}, Ended: []Job{ended, earlier}, HoursFrom: c.from, Location: time.UTC}
				if c.from > 0 {
					in.Hours = hours[:1]
					in.Base = Frozen{Usage: map[Key]float64{{3, 5}: spread}}
				}
				u, problems := Rebuild(in)
				if len(problems) > 0 {
					t.Fatal(problems)
				}
				if w := want + c.earlier; math.Abs(u.Raw[2]-w) > 1e-9*w {
					t.Errorf("half-life %v, at h+%v, HoursFrom %v: raw usage %.3f, want %.3f (slurmctld's passes): off by %.2g", hl, at-h, c.from-h, u.Raw[2], w, (u.Raw[2]-w)/w)
				}
			}
		}
	}
}
