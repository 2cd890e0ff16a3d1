package usage

import (
	"testing"
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
