package usage

import (
	"math"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// names are tres_table's names as slurmdbd gives them (static ids, then a
// GRES and a license).
var billingNames = map[uint32]string{1: "cpu", 2: "mem", 3: "energy", 4: "node", 5: "billing", 1001: "gres/gpu", 1002: "license/matlab"}

// TestBillable: values derived by hand from assoc_mgr_tres_weighted and
// calc_job_billable_tres (no weights: the CPUs; SUM; MAX_TRES: the
// largest node TRES plus the global ones; MAX_TRES_GRES: the largest of
// CPU, memory and nodes plus the GRES plus the global ones).
func TestBillable(t *testing.T) {
	// 4 CPUs, 64 GiB, 1 node, 2 GPUs, 3 licenses, billing and energy to
	// be left out
	counts, err := TRESCounts("1=4,2=65536,3=999,4=1,5=77,1001=2,1002=3")
	if err != nil {
		t.Fatal(err)
	}
	// CPU=1, Mem=0.25G (per MB: 0.25/1024), GRES/gpu=2, license=1:
	// cpu 4, mem 16, gpu 4, license 3
	w := map[string]map[string]float64{"p": {"cpu": 1, "mem": 0.25 / 1024, "gres/gpu": 2, "license/matlab": 1, "energy": 5}}
	for _, c := range []struct {
		name string
		r    BillingRules
		part string
		want float64
	}{
		{"no weights: the CPUs", BillingRules{Weights: w}, "other", 4},
		{"sum", BillingRules{Weights: w}, "p", 4 + 16 + 4 + 3},
		{"MAX_TRES", BillingRules{Weights: w, MaxTRES: true}, "p", 16 + 3},
		{"MAX_TRES_GRES", BillingRules{Weights: w, MaxGRES: true}, "p", 16 + 4 + 3},
	} {
		if got := c.r.Billable(c.part, counts, billingNames); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// siteJob is a job of the reweighing tests: what slurmdbd records of it
// (the billing truncated) and what slurmctld charges it per second.
type siteJob struct {
	Job
	charged float64 // billing × UsageFactor, as slurmctld charges
}

// siteRows are the hourly billing rows slurmdbd's rollup makes of jobs up
// to lastHourly: each hour holds the recorded (integer) billing times the
// job's seconds in it, with the QOS UsageFactor only where byQOS (the
// 24.11+ per-QOS split applied).
func siteRows(jobs []siteJob, lastHourly int64, factors map[uint32]float64, byQOS bool) []Row {
	var rows []Row
	for _, j := range jobs {
		rec, _, _ := TRESCount(j.TRESAlloc, TRESBilling)
		end := lastHourly
		if j.End != 0 {
			end = min(end, j.End)
		}
		for h := j.Start - j.Start%3600; h < end; h += 3600 {
			secs := min(end, h+3600) - max(j.Start, h)
			v := float64(rec) * float64(secs)
			if byQOS {
				v *= factor(factors, j.QOS)
			}
			rows = append(rows, Row{Assoc: j.Assoc, TRES: TRESBilling, Start: h, AllocSecs: v})
		}
	}
	return rows
}

// TestReweighedJobs: slurmctld charges a job its unrounded billing times
// its QOS UsageFactor at every pass (priority_multifactor.c
// _apply_new_usage: billable_tres, a double, × usage_factor), while the
// rollups count the billing truncated (tres_alloc) and, before 24.11, no
// factor. Derived independently: each user runs one job, and its RawUsage
// must be the job's charge pass by pass (fairshare.Passes.JobUsage) at
// the charged rate, whichever side of the last rollup its seconds fall.
// The jobs are a site-shaped cluster's: 6 CPUs and 6G in a
// partition billing CPU=1,Mem=0.25G (7.5, recorded 7), a scavenger job
// (UsageFactor 0) and a high-QOS job (UsageFactor 2) of 13.5.
func TestReweighedJobs(t *testing.T) {
	rules := BillingRules{Weights: map[string]map[string]float64{"cpu": {"cpu": 1, "mem": 0.25 / 1024}}}
	factors := map[uint32]float64{1: 1, 2: 0, 3: 2}
	p := fairshare.Passes{HalfLife: 3600, Period: 60, Phase: 17, ChargeJobEnd: true}
	const lastHourly = 3 * 3600
	jobs := []siteJob{
		{Job{Inx: 1, ID: 1, Partition: "cpu", Assoc: 3, QOS: 1, Start: 1000, End: 9000, TRESAlloc: "1=6,2=6144,4=1,5=7"}, 7.5},
		{Job{Inx: 2, ID: 2, Partition: "cpu", Assoc: 4, QOS: 2, Start: 2000, TRESAlloc: "1=4,2=4096,4=1,5=5"}, 0},
		{Job{Inx: 3, ID: 3, Partition: "cpu", Assoc: 5, QOS: 3, Start: 4000, End: 12000, TRESAlloc: "1=12,2=6144,4=1,5=13"}, 27},
	}
	assocs := []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1},
		{Account: "a", User: "u1", Parent: 1, Shares: 1}, {Account: "a", User: "u2", Parent: 1, Shares: 1}, {Account: "a", User: "u3", Parent: 1, Shares: 1}}
	node := map[uint32]int{1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
	at := 12600.0 + 30
	for _, byQOS := range []bool{false, true} {
		in := Inputs{Assocs: assocs, Node: node, Passes: p, At: at, LastHourly: lastHourly, UsageFactor: factors, RowsByQOS: byQOS,
			Hours: siteRows(jobs, lastHourly, factors, byQOS)}
		for _, j := range jobs {
			if j.End != 0 && j.End <= lastHourly {
				in.Ended = append(in.Ended, j.Job)
			} else {
				in.Jobs = append(in.Jobs, j.Job)
			}
		}
		if unpriced := rules.Price(in.Jobs, billingNames); len(unpriced) != 0 {
			t.Fatalf("unpriced %v", unpriced)
		}
		rules.Price(in.Ended, billingNames)
		u, problems := Rebuild(in)
		if len(problems) != 0 {
			t.Fatal(problems)
		}
		for i, j := range jobs {
			want := p.JobUsage(float64(j.Start), float64(j.End), at, j.charged)
			if got := u.Raw[2+i]; math.Abs(got-want) > 1e-9*math.Max(1, want) {
				t.Errorf("rows by QOS %v: job %d (%s): RawUsage %.6f, slurmctld charges %.6f (%+.3f%%)", byQOS, j.ID, j.TRESAlloc, got, want, 100*(got-want)/want)
			}
		}
	}
}

// TestReweighedFrozen: the same jobs' difference frozen with their rows
// (a job that ended below the watermark, Tails as a Refresher freezes
// it): at a 7-day half-life the rows' hours spread evenly weigh as the
// jobs' own seconds to within 0.05% (the partial hours' seconds counted at the middle of their hour), and a scavenger job's usage leaves
// nothing.
func TestReweighedFrozen(t *testing.T) {
	rules := BillingRules{Weights: map[string]map[string]float64{"cpu": {"cpu": 1, "mem": 0.25 / 1024}}}
	factors := map[uint32]float64{1: 1, 2: 0, 3: 2}
	p := fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 17, ChargeJobEnd: true}
	const lastHourly = 30 * 3600
	jobs := []siteJob{
		{Job{Inx: 1, ID: 1, Partition: "cpu", Assoc: 3, QOS: 1, Start: 1000, End: 9000, TRESAlloc: "1=6,2=6144,4=1,5=7"}, 7.5},
		{Job{Inx: 2, ID: 2, Partition: "cpu", Assoc: 4, QOS: 2, Start: 2000, End: 20000, TRESAlloc: "1=4,2=4096,4=1,5=5"}, 0},
		{Job{Inx: 3, ID: 3, Partition: "cpu", Assoc: 5, QOS: 3, Start: 4000, End: 12000, TRESAlloc: "1=12,2=6144,4=1,5=13"}, 27},
	}
	assocs := []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1},
		{Account: "a", User: "u1", Parent: 1, Shares: 1}, {Account: "a", User: "u2", Parent: 1, Shares: 1}, {Account: "a", User: "u3", Parent: 1, Shares: 1}}
	node := map[uint32]int{1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
	at := float64(lastHourly) + 600
	in := Inputs{Assocs: assocs, Node: node, Passes: p, At: at, LastHourly: lastHourly, UsageFactor: factors, HoursFrom: lastHourly}
	frozen := NewFrozen(p.LastPass(at))
	frozen.AddRows(&in, siteRows(jobs, lastHourly, factors, false), Hour)
	ended := make([]Job, len(jobs))
	for i, j := range jobs {
		ended[i] = j.Job
	}
	rules.Price(ended, billingNames)
	diff, problems := in.Tails(ended, false)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	frozen.Add(diff)
	in.Base = frozen
	u, _ := Rebuild(in)
	for i, j := range jobs {
		want := p.JobUsage(float64(j.Start), float64(j.End), at, j.charged)
		got := u.Raw[2+i]
		if j.charged == 0 && math.Abs(got) > 1e-6 || j.charged != 0 && math.Abs(got-want) > 5e-4*want {
			t.Errorf("job %d (%s): frozen RawUsage %.6f, slurmctld charges %.6f", j.ID, j.TRESAlloc, got, want)
		}
	}
}

// TestUnpricedBound: a job billed by weights slurm.conf no longer holds
// (7.5 under the old, 9.5 under today's, recorded 7) is charged at its
// record, and Unpriced bounds the rest: slurmctld's charge lies between
// Raw and Raw+Unpriced, for its seconds before the rollup and after.
func TestUnpricedBound(t *testing.T) {
	rules := BillingRules{Weights: map[string]map[string]float64{"cpu": {"cpu": 1, "mem": 0.5 / 1024}}} // 6 + 3 = 9
	p := fairshare.Passes{HalfLife: 3600, Period: 60, Phase: 17, ChargeJobEnd: true}
	const lastHourly = 3 * 3600
	j := siteJob{Job{Inx: 1, ID: 1, Partition: "cpu", Assoc: 3, QOS: 3, Start: 1000, TRESAlloc: "1=6,2=6144,4=1,5=7"}, 7.5 * 2}
	assocs := []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1}, {Account: "a", User: "u1", Parent: 1, Shares: 1}}
	factors := map[uint32]float64{3: 2}
	in := Inputs{Assocs: assocs, Node: map[uint32]int{1: 0, 2: 1, 3: 2}, Passes: p, At: 12630, LastHourly: lastHourly, UsageFactor: factors,
		Hours: siteRows([]siteJob{j}, lastHourly, factors, false), Jobs: []Job{j.Job}}
	if unpriced := rules.Price(in.Jobs, billingNames); len(unpriced) != 1 || unpriced[0].ID != 1 {
		t.Fatalf("unpriced %v, want job 1", unpriced)
	}
	u, _ := Rebuild(in)
	ctld := p.JobUsage(float64(j.Start), 0, in.At, j.charged)
	raw, bound := u.Raw[2], u.Unpriced[2]
	if rec := p.JobUsage(float64(j.Start), 0, in.At, 7*2); math.Abs(raw-rec) > 1e-9*rec {
		t.Errorf("RawUsage %.3f, want the record's charge %.3f", raw, rec)
	}
	if ctld < raw || ctld > raw+bound || bound > 1.01*ctld/7.5 || u.Unpriced[0] != bound {
		t.Errorf("slurmctld's %.3f outside [%.3f, %.3f + %.3f], or the bound not one unit a second, or not summed up to root (%v)", ctld, raw, raw, bound, u.Unpriced)
	}
}

// TestPricedBeforeRules: MAX_TRES set after a job of 4 CPUs and 3 GB at
// Mem=0.25G started, summed 4.75 then (slurmctld's charge), 4 now, both
// recorded 4: the job is charged the middle, 4.375, and the bound holds
// the 0.375 a second either way; one of 6 CPUs and 6 GB (7.5 summed, 6 with MAX_TRES,
// recorded 7) is charged 7.5, the only flags' value that truncates to its
// record, exactly; one that started after the rules is exact, as is one
// in a partition without weights (its CPUs whatever the flags).
func TestPricedBeforeRules(t *testing.T) {
	rules := BillingRules{Weights: map[string]map[string]float64{"cpu": {"cpu": 1, "mem": 0.25 / 1024}}, MaxTRES: true, Since: 5000}
	p := fairshare.Passes{HalfLife: 3600, Period: 60, Phase: 17, ChargeJobEnd: true}
	jobs := []Job{
		{Inx: 1, ID: 1, Partition: "cpu", Assoc: 3, QOS: 1, Start: 1000, TRESAlloc: "1=4,2=3072,4=1,5=4"},
		{Inx: 2, ID: 2, Partition: "cpu", Assoc: 3, QOS: 1, Start: 6000, TRESAlloc: "1=4,2=3072,4=1,5=4"},
		{Inx: 3, ID: 3, Partition: "debug", Assoc: 3, QOS: 1, Start: 1000, TRESAlloc: "1=4,2=3072,4=1,5=4"},
		{Inx: 4, ID: 4, Partition: "cpu", Assoc: 3, QOS: 1, Start: 1000, TRESAlloc: "1=6,2=6144,4=1,5=7"},
	}
	want := map[uint32][2]float64{1: {4.375, 0.375}, 2: {4, 0}, 3: {4, 0}, 4: {7.5, 0}} // charged, spread
	if unpriced := rules.Price(jobs, billingNames); len(unpriced) != 0 {
		t.Fatalf("unpriced %v: want none (each record is today's rules' truncation)", unpriced)
	}
	for _, j := range jobs {
		if w := want[j.ID]; !j.Priced || j.Billed != w[0] || math.Abs(j.Spread-w[1]) > 1e-12 {
			t.Errorf("job %d: priced %v at %v, spread %v; want priced at %v, spread %v", j.ID, j.Priced, j.Billed, j.Spread, w[0], w[1])
		}
	}
	assocs := []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1}, {Account: "a", User: "u1", Parent: 1, Shares: 1}}
	in := Inputs{Assocs: assocs, Node: map[uint32]int{1: 0, 2: 1, 3: 2}, Passes: p, At: 12630, LastHourly: 0, Jobs: jobs[:1]}
	u, _ := Rebuild(in)
	ctld := p.JobUsage(1000, 0, in.At, 4.75)
	if raw, bound := u.Raw[2], u.Unpriced[2]; math.Abs(ctld-(raw+bound)) > 1e-9*ctld || bound > 1.0001*ctld*0.375/4.75 {
		t.Errorf("slurmctld's %.3f is not the bound's top %.3f + %.3f, or the bound not 0.375 a second", ctld, raw, bound)
	}
}
