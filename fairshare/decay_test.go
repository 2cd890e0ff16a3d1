package fairshare

import (
	"math"
	"testing"
)

// TestDecayFactor: d = 1 - 0.693/HL, so d^HL = 0.500073 at 7 days, and the
// effective half-life is 1.000212 times the configured one.
func TestDecayFactor(t *testing.T) {
	p := Passes{HalfLife: 604800, Period: 300}
	near(t, "d^HL at 7 days", math.Pow(p.D(), 604800), 0.500073, 1e-6)
	near(t, "effective half-life", math.Log(0.5)/math.Log(p.D())/604800, 1.000212, 1e-6)
	if (Passes{Period: 60}).D() != 1 {
		t.Error("half-life 0 must mean no decay")
	}
}

// TestUnchargedEnd is the job measured in
// ../shared/research/real-slurm-observations.md: 299 s from 03:44:14 to
// 03:49:13, passes at hh:mm:18.6 every minute. Without
// AccountingStorageEnforce=limits slurmctld charged only up to the pass at
// 03:48:18.6 (244.6 s, 18% lost); with limits, all 299 s.
func TestUnchargedEnd(t *testing.T) {
	base := 1795000000.0 - math.Mod(1795000000.0, 3600) // some hour
	at := func(m, s float64) float64 { return base + 44*60 + (m-44)*60 + s }
	p := Passes{Period: 60, Phase: at(44, 18.6)}
	start, end, later := at(44, 14), at(49, 13), at(55, 0)
	near(t, "charged without limits", p.JobUsage(start, end, later, 1), at(48, 18.6)-start, 1e-6)
	p.ChargeJobEnd = true
	near(t, "charged with limits", p.JobUsage(start, end, later, 1), 299, 1e-6)
	// A job that starts and ends between two passes is never charged.
	p.ChargeJobEnd = false
	if u := p.JobUsage(at(45, 20), at(46, 10), later, 8); u != 0 {
		t.Errorf("job inside one pass interval charged %v", u)
	}
	// Nothing after the last pass is charged yet.
	if u := p.JobUsage(at(50, 30), 0, at(51, 10), 8); u != 0 {
		t.Errorf("running job charged before its first pass: %v", u)
	}
}

// TestJobUsageByHand checks one running job against the charges written
// out: passes at 0, 60, 120, 180; a job from 30 on 4 CPUs; raw usage after
// the pass at 180.
func TestJobUsageByHand(t *testing.T) {
	p := Passes{HalfLife: 600, Period: 60, Phase: 0}
	d := p.D()
	want := 4 * (30*math.Pow(d, 30)*math.Pow(d, 120) + 60*math.Pow(d, 60)*math.Pow(d, 60) + 60*math.Pow(d, 60))
	near(t, "running job", p.JobUsage(30, 0, 200, 4), want, 1e-9)
}

// TestJobUsageInRealSlurm is a job of real Slurm 22.05.8 (a 10-minute
// half-life, AccountingStorageEnforce=limits): erin's 128 CPUs from :27 to 3:51
// later (epoch 1795776087 to 1795776318), passes at :20 of every minute,
// nothing else charged to her; slurmctld's log (DebugFlags=Priority) gave
// her 17380.783914 at the pass of 1795776620. Its charges: 53 s at the
// first pass, 60 s at the next two, the last 58 s at her end, each Δ·d^Δ
// and decayed from its pass (the last from the pass before it). Split at
// the hour's end that the hourly rollup cut her job at and anywhere else,
// the parts add up to the whole.
func TestJobUsageInRealSlurm(t *testing.T) {
	p := Passes{HalfLife: 600, Period: 60, Phase: 1795776620, ChargeJobEnd: true}
	start, end, at := 1795776087.0, 1795776318.0, 1795776621.0
	near(t, "erin as slurmctld charged her", p.JobUsage(start, end, at, 128), 17380.783914, 1e-5)
	for _, cut := range []float64{start + 10, 1795776140, 1795776141.5, 1795776300, end - 1} {
		parts := p.JobUsageIn(start, end, start, cut, at, 128) + p.JobUsageIn(start, end, cut, math.Inf(1), at, 128)
		near(t, "two parts", parts, 17380.783914, 1e-5)
	}
	// without limits the last 58 s are never charged, in any part
	p.ChargeJobEnd = false
	if u := p.JobUsageIn(start, end, 1795776260, end, at, 128); u != 0 {
		t.Errorf("the uncharged last interval weighs %v", u)
	}
}

// TestBucketUsageMatchesSlices: a bucket equals the sum of its thin
// slices, each charged at the pass that ends its interval with the
// interval's weight d^P (the bucket rule), computed the slow way.
func TestBucketUsageMatchesSlices(t *testing.T) {
	for _, p := range []Passes{
		{HalfLife: 3600, Period: 300, Phase: 17},
		{HalfLife: 604800, Period: 60, Phase: 18.6},
		{HalfLife: 0, Period: 300, Phase: 0},
	} {
		from, to := 7200.0, 10800.0
		for _, at := range []float64{9000, 10800, 11000, 20000} {
			now := p.LastPass(at)
			// slices of 0.2 s, aligned with the passes (phase 18.6)
			const step = 0.2
			slow := 0.0
			for i := 0; i < int((to-from)/step); i++ {
				s := from + float64(i)*step + step/2
				q := p.LastPass(s) + p.Period // the pass that charges this slice
				if q <= now {
					slow += step * math.Pow(p.D(), now-q+p.Period)
				}
			}
			near(t, "bucket", p.BucketUsage(from, to, at, 3600), slow, 1e-9*slow+1e-9)
		}
	}
}
