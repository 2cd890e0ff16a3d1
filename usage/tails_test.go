package usage

import (
	"math"
	"math/rand/v2"
	"strings"
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

// TestUnchargedTails: without AccountingStorageEnforce=limits slurmctld
// never charges a finished job's time after its last decay pass, which the
// rollups count. A 20 s job inside one pass interval is charged nothing
// (observed on real 22.05: docs/usage.md); a 300 s job loses its last
// partial interval. The rebuilt usage is what slurmctld charged, the
// rest is uncharged; with limits everything is charged.
func TestUnchargedTails(t *testing.T) {
	assocs, node := oneUser()
	// a 1000-day half-life: decay inside the test's hours is below 1e-5
	p := fairshare.Passes{HalfLife: 1000 * 86400, Period: 300, Phase: 18}
	const h = 3600
	short := Job{Inx: 1, Assoc: 3, Start: h + 20, End: h + 40, TRESAlloc: "1=64,5=64"}  // between the passes at h+18 and h+318
	long := Job{Inx: 2, Assoc: 3, Start: h + 1000, End: h + 1300, TRESAlloc: "1=8,5=8"} // last pass at h+1218: 82 s uncharged
	hours := []Row{{Assoc: 3, TRES: 5, Start: h, AllocSecs: 20*64 + 300*8}}
	for _, limits := range []bool{false, true} {
		p.ChargeJobEnd = limits
		in := Inputs{Assocs: assocs, Node: node, Passes: p, At: 3 * h, LastHourly: 2 * h, Hours: hours, Ended: []Job{short, long}}
		u, problems := Rebuild(in)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		wantUncharged := float64(20*64 + 82*8)
		if limits {
			wantUncharged = 0
		}
		total := float64(20*64 + 300*8)
		if got := u.Uncharged[2]; math.Abs(got-wantUncharged) > 1e-4*total {
			t.Errorf("limits %v: uncharged %v, want %v", limits, got, wantUncharged)
		}
		if got := u.Raw[2]; math.Abs(got-(total-wantUncharged)) > 1e-4*total {
			t.Errorf("limits %v: charged %v, want %v", limits, got, total-wantUncharged)
		}
		if u.Uncharged[0] != u.Uncharged[2] {
			t.Errorf("root's uncharged %v is not its subtree's %v", u.Uncharged[0], u.Uncharged[2])
		}
	}
}

// TestTailsBelowZero: a job whose whole usage is its uncharged tail leaves
// its rollup at 0 give or take rounding; rounding below zero is 0 (the
// fairshare tree rejects negative usage: a refresh failed on -9.2e-11 in
// TestFaultBadData), and a tail larger than the rollup is reported and
// counted as 0.
func TestTailsBelowZero(t *testing.T) {
	assocs, node := oneUser()
	p := fairshare.Passes{HalfLife: 1000 * 86400, Period: 300, Phase: 18}
	const h = 3600
	job := Job{Inx: 1, Assoc: 3, Start: h + 20, End: h + 40, TRESAlloc: "1=64,5=64"} // between two passes: all tail
	for _, c := range []struct {
		alloc   float64
		problem bool
	}{{20*64 - 0.02, false}, {20*64 - 100, true}} { // the hour's spread decays 1.3e-5 less than the tail
		in := Inputs{Assocs: assocs, Node: node, Passes: p, At: 3 * h, LastHourly: 2 * h,
			Hours: []Row{{Assoc: 3, TRES: 5, Start: h, AllocSecs: c.alloc}}, Ended: []Job{job}}
		u, problems := Rebuild(in)
		if u.Raw[0] != 0 || u.Raw[2] != 0 {
			t.Errorf("alloc_secs %v: raw usage %v, want 0", c.alloc, u.Raw)
		}
		if got := len(problems) > 0; got != c.problem || got && !strings.Contains(problems[0].Error(), `account="a" user="u" is -`) {
			t.Errorf("alloc_secs %v: problems %v, want one: %v", c.alloc, problems, c.problem)
		}
	}
}
