package usage

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

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

// oneUser is root, account a and its user u (id_assoc 1, 2, 3).
func oneUser() ([]fairshare.Association, map[uint32]int) {
	return []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1}, {Account: "a", User: "u", Parent: 1, Shares: 1}},
		map[uint32]int{1: 0, 2: 1, 3: 2}
}
