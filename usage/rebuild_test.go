package usage

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

func TestRawUsage(t *testing.T) {
	// root, a and its user u1 (id_assoc 1, 2, 3); removed ones carried
	// by a: user gone (4) of a, account old (5) under a and its user u3
	// (6), as slurmdbd's nodes maps them (TestNodes)
	assocs := []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1}, {Account: "a", User: "u1", Parent: 1, Shares: 1}}
	node := map[uint32]int{1: 0, 2: 1, 3: 2, 4: 1, 5: 1, 6: 1}
	p := fairshare.Passes{HalfLife: 3600, Period: 60, Phase: 0}
	const hour = 7200.0
	at := 3*3600.0 + 600
	in := Inputs{
		Assocs: assocs, Node: node, Passes: p, At: at,
		LastHourly: 3 * 3600,
		Hours: []Row{
			{Assoc: 3, TRES: 5, Start: 7200, AllocSecs: 3600 * 4},
			{Assoc: 3, TRES: 1, Start: 7200, AllocSecs: 3600 * 2},
			{Assoc: 3, TRES: 2, Start: 7200, AllocSecs: 100 * 1000}, // job 1's mem
			{Assoc: 4, TRES: 5, Start: 7200, AllocSecs: 3600},
			{Assoc: 6, TRES: 5, Start: 3600, AllocSecs: 1800},
			{Assoc: 99, TRES: 5, Start: 3600, AllocSecs: 5},
		},
		Jobs: []Job{
			{Inx: 1, Assoc: 3, QOS: 1, Start: 3*3600 - 100, TRESAlloc: "1=4,2=1000,3=18446744073709551614,5=8"},
			{Inx: 2, Assoc: 3, QOS: 2, Start: 3*3600 + 60, End: 3*3600 + 400, TRESAlloc: "1=2"}, // no billing: CPUs
			{Inx: 3, Assoc: 3, QOS: 1, Start: 3*3600 + 60, TRESAlloc: "5=x"},
		},
		UsageFactor: map[uint32]float64{1: 1, 2: 0.5},
		AllTRES:     true,
	}
	usage, problems := Rebuild(in)
	raw := usage.Raw
	// Job 1's 100 s before the rollup are in the hour's row, but count as
	// slurmctld charged them (retime): the job counts whole, as charged;
	// the rest of the row is spread over the hour.
	u1 := p.BucketUsage(hour, hour+3600, at, 3600*4-800) + p.JobUsage(3*3600-100, 0, at, 8) +
		p.JobUsage(3*3600+60, 3*3600+400, at, 2*0.5)
	gone := p.BucketUsage(hour, hour+3600, at, 3600)
	u3 := p.BucketUsage(3600, 7200, at, 1800)
	if math.Abs(raw[2]-u1) > 1e-9 || math.Abs(raw[1]-(u1+gone+u3)) > 1e-9 || math.Abs(raw[0]-raw[1]) > 1e-9 {
		t.Errorf("raw %v, want u1 %v, a %v", raw, u1, u1+gone+u3)
	}
	// Per TRES: cpu from the rollup row and the jobs' cpu counts (the
	// second job has no billing TRES and is billed its CPUs), mem from
	// the first job; energy never.
	cpu := p.BucketUsage(hour, hour+3600, at, 3600*2-400) + p.JobUsage(3*3600-100, 0, at, 4) + p.JobUsage(3*3600+60, 3*3600+400, at, 2*0.5)
	if got := usage.TRES[1][2]; math.Abs(got-cpu) > 1e-9 {
		t.Errorf("cpu usage of u1 %v, want %v", got, cpu)
	}
	if got, want := usage.TRES[2][0], p.JobUsage(3*3600-100, 0, at, 1000); math.Abs(got-want) > 1e-9 {
		t.Errorf("mem usage of root %v, want %v", got, want)
	}
	if _, ok := usage.TRES[TRESEnergy]; ok {
		t.Error("energy counted")
	}
	// Without AllTRES billing alone is kept, and it is the same.
	in.AllTRES = false
	if billing, _ := Rebuild(in); len(billing.TRES) != 1 || !slices.Equal(billing.Raw, raw) {
		t.Errorf("billing alone: TRES %v, raw %v, want only billing and raw %v", slices.Collect(maps.Keys(billing.TRES)), billing.Raw, raw)
	}
	all := ""
	for _, e := range problems {
		all += e.Error() + "\n"
	}
	for _, want := range []string{"hourly usage of id_assoc=99: no live association", `job_db_inx=3: TRES string "5=x": entry "5=x": expected id=count`} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not say %q:\n%s", want, all)
		}
	}
	// A reset cuts history: only the part after it counts.
	in.Since = hour + 1800
	usage, _ = Rebuild(in)
	raw = usage.Raw
	want := p.BucketUsage(hour+1800, hour+3600, at, (3600*4-800)/2) + p.JobUsage(3*3600-100, 0, at, 8) + p.JobUsage(3*3600+60, 3*3600+400, at, 1)
	if math.Abs(raw[2]-want) > 1e-9 {
		t.Errorf("after a reset u1 %v, want %v", raw[2], want)
	}
}

func TestTRESCount(t *testing.T) {
	for _, tc := range []struct {
		s    string
		id   int
		n    uint64
		ok   bool
		fail bool
	}{
		{"1=64,3=18446744073709551614,4=1,5=64", 5, 64, true, false},
		{"1=4,2=16000,1001=2", 1001, 2, true, false},
		{"1=4", 5, 0, false, false},
		{"", 5, 0, false, false},
		{"1=4,junk", 5, 0, false, true},
	} {
		n, ok, err := TRESCount(tc.s, tc.id)
		if n != tc.n || ok != tc.ok || (err != nil) != tc.fail {
			t.Errorf("TRESCount(%q, %d) = %d, %v, %v", tc.s, tc.id, n, ok, err)
		}
	}
}

func FuzzTRESCount(f *testing.F) {
	for _, s := range []string{"1=64,3=18446744073709551614,4=1,5=64", "1=4,2=16000,1001=2", "", ",,", "5=", "=5", "5=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok, err := TRESCount(s, TRESBilling)
		if err != nil && (ok || n != 0) {
			t.Fatalf("%q: error %v with a count %d/%v", s, err, n, ok)
		}
		if err == nil && ok && !strings.Contains(s, "5=") {
			t.Fatalf("%q: billing found where there is none", s)
		}
	})
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

// TestRetimedPartialHours: a rollup row is spread over its hour, but a job
// that started or ended inside the hour charged slurmctld at its own time.
// Right after a rollup, spread, the minutes before it of a job still
// running would weigh as if at the middle of the hour: with a one-hour half-life 24 %
// below what slurmctld charged (real 22.05 in TestServeRealSlurm, across an
// hourly rollup: raw usage drift 0.26, falling to 0.16 as the jobs ran
// on). The want is slurmctld's charging pass by pass (Passes.JobUsage)
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

// oneUser is root, account a and its user u (id_assoc 1, 2, 3).
func oneUser() ([]fairshare.Association, map[uint32]int) {
	return []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1}, {Account: "a", User: "u", Parent: 1, Shares: 1}},
		map[uint32]int{1: 0, 2: 1, 3: 2}
}
