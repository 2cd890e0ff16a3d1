package engine

import (
	"fmt"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// tresNames are tres_table's names as slurmdbd gives them.
var tresNames = map[uint32]string{1: "cpu", 2: "mem", 3: "energy", 4: "node", 5: "billing"}

// TestCheckBilling: slurmctld records its billing truncated; a job
// matches at the truncation of the rules' value and not otherwise, jobs
// that started before slurm.conf last changed and jobs without a billing
// are not checked.
func TestCheckBilling(t *testing.T) {
	r := usage.BillingRules{Weights: map[string]map[string]float64{"gpu": {"cpu": 1.1}}}
	job := func(id uint32, part string, start int64, cpus, billing int) usage.Job {
		tres := fmt.Sprintf("1=%d,2=1000,4=1", cpus)
		if billing >= 0 {
			tres += fmt.Sprintf(",5=%d", billing)
		}
		return usage.Job{ID: id, Partition: part, Start: start, TRESAlloc: tres}
	}
	jobs := []usage.Job{
		job(1, "gpu", 100, 16, 17),  // 17.6 truncated
		job(2, "gpu", 100, 16, 16),  // billed at CPU=1.0: 10% less
		job(3, "gpu", 100, 1, 1),    // 1.1: no way to tell
		job(4, "gpu", 50, 16, 16),   // before slurm.conf changed
		job(5, "gpu", 100, 16, -1),  // no billing recorded
		job(6, "debug", 100, 8, 8),  // no weights: the CPUs
		job(7, "debug", 100, 30, 8), // billed by weights slurm.conf lacks
	}
	got := compareBilling(jobs, r, tresNames, 100)
	if len(got) != 2 {
		t.Fatalf("%+v", got)
	}
	debug, gpu := got[0], got[1]
	if gpu.Partition != "gpu" || gpu.Jobs != 3 || gpu.Mismatched != 1 || gpu.Recorded != 34 || gpu.Expected != 35 ||
		gpu.Example == nil || gpu.Example.Job != 2 || gpu.Example.Recorded != 16 {
		t.Errorf("gpu: %+v %+v", gpu, gpu.Example)
	}
	if debug.Partition != "debug" || debug.Jobs != 2 || debug.Mismatched != 1 || debug.Example.Job != 7 || debug.Example.Expected != 30 {
		t.Errorf("debug: %+v %+v", debug, debug.Example)
	}
	// a weight whose product is a hair off an integer either way
	r = usage.BillingRules{Weights: map[string]map[string]float64{"p": {"cpu": 0.1}}}
	for _, rec := range []int{2, 3} {
		if b := compareBilling([]usage.Job{job(1, "p", 0, 30, rec)}, r, tresNames, 0); b[0].Mismatched != 0 {
			t.Errorf("0.1 × 30 CPUs recorded as %d: %+v", rec, b[0])
		}
	}
	if b := compareBilling([]usage.Job{job(1, "p", 0, 30, 4)}, r, tresNames, 0); b[0].Mismatched != 1 {
		t.Errorf("0.1 × 30 CPUs recorded as 4: %+v", b[0])
	}
}
