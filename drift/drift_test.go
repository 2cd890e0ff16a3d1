package drift

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

func TestNumJSON(t *testing.T) {
	for _, tc := range []struct {
		n    Num
		want string
	}{
		{Num(math.NaN()), "null"}, {Num(math.Inf(1)), `"inf"`}, {Num(math.Inf(-1)), `"-inf"`}, {0.25, "0.25"}, {1e-7, "1e-07"},
	} {
		b, err := json.Marshal(tc.n)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v marshals to %s, %v; want %s", float64(tc.n), b, err, tc.want)
		}
		var back Num
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !(back == tc.n || math.IsNaN(float64(back)) && math.IsNaN(float64(tc.n))) {
			t.Errorf("%s reads back as %v", b, float64(back))
		}
	}
}

func vals(fs, lfs float64) Values {
	nan := Num(math.NaN())
	return Values{NormShares: 0.5, RawUsage: 10, NormUsage: nan, EffectiveUsage: 0.1, FairShare: Num(fs), LevelFS: Num(lfs)}
}

func TestCompare(t *testing.T) {
	inf := math.Inf(1)
	k := func(a, u string) result.AssocKey { return result.AssocKey{Account: a, User: u} }
	reported := []Side{
		{Key: k("root", ""), Values: vals(math.NaN(), math.NaN())},
		{Key: k("a", "u"), Values: vals(0.5, inf)},     // inf vs inf: drift 0
		{Key: k("a", "u"), Values: vals(0.25, 2)},      // same key twice: matched in order
		{Key: k("a", "v"), Values: vals(0.3, 1)},       // beyond tolerance
		{Key: k("a", "gone"), Values: vals(0.3, 1)},    // only reported
		{Key: k("a", "w"), Values: vals(0.3000005, 1)}, // within tolerance
		{Key: k("a", "x"), Values: vals(0.3, inf)},     // inf vs finite
	}
	computed := []Side{
		{Key: k("root", ""), Values: vals(math.NaN(), math.NaN())},
		{Key: k("a", "u"), Values: vals(0.5, inf)},
		{Key: k("a", "u"), Values: vals(0.25, 2)},
		{Key: k("a", "v"), Values: vals(0.31, 1)},
		{Key: k("a", "w"), Values: vals(0.3, 1)},
		{Key: k("a", "x"), Values: vals(0.3, 5)},
		{Key: k("a", "new"), Values: vals(0.1, 1)}, // only computed
	}
	r := Compare("fair_tree", 1e-6, reported, computed)
	want := []Status{StatusOK, StatusOK, StatusOK, StatusDrift, StatusOnlyReported, StatusOK, StatusDrift, StatusOnlyComputed}
	if len(r.Associations) != len(want) {
		t.Fatalf("%d entries, want %d", len(r.Associations), len(want))
	}
	for i, e := range r.Associations {
		if e.Status != want[i] {
			t.Errorf("entry %d (%s/%s): %s, want %s", i, e.Account, e.User, e.Status, want[i])
		}
	}
	if d := r.Associations[1].Drift.LevelFS; d != 0 {
		t.Errorf("inf - inf drift %v, want 0", d)
	}
	if d := r.Associations[6].Drift.LevelFS; !math.IsInf(float64(d), -1) {
		t.Errorf("finite - inf drift %v, want -inf", d)
	}
	if d := r.Associations[0].Drift.FairShare; !math.IsNaN(float64(d)) {
		t.Errorf("blank vs blank drift %v, want null", d)
	}
	if r.Summary.Counts[StatusDrift] != 2 || r.Summary.Beyond["fairshare"] != 1 || r.Summary.Beyond["level_fs"] != 1 {
		t.Errorf("summary %+v", r.Summary)
	}
	if math.Abs(float64(r.Summary.MaxDrift.FairShare)-0.01) > 1e-12 || !math.IsInf(float64(r.Summary.MaxDrift.LevelFS), -1) {
		t.Errorf("max drift %s", r.Summary.MaxDrift.String())
	}
	if r.OK() {
		t.Error("OK() with drift")
	}
	if s := Summarize(1e-6, reported, computed); fmt.Sprint(s) != fmt.Sprint(r.Summary) {
		t.Errorf("Summarize %+v, Compare's summary %+v", s, r.Summary)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "drift 2") {
		t.Errorf("table %q, %v", b.String(), err)
	}
}

// TestCompareBounds: a side's bound widens what is allowed.
func TestCompareBounds(t *testing.T) {
	rep := []Side{{Key: result.AssocKey{Account: "a"}, Values: vals(0.5, 1)}}
	com := []Side{{Key: result.AssocKey{Account: "a"}, Values: vals(0.6, 1), Bound: Values{FairShare: 0.2}}}
	r := Compare("classic", 1e-6, rep, com)
	if e := r.Associations[0]; e.Status != StatusOK || math.Abs(float64(e.Allowed.FairShare)-0.200001) > 1e-12 {
		t.Errorf("status %s allowed %v", e.Status, e.Allowed.FairShare)
	}
}

// TestReportBilling: a partition with jobs billed otherwise than
// slurm.conf says makes an otherwise clean report not OK, and the table
// names it; one that agrees does not.
func TestReportBilling(t *testing.T) {
	r := &Report{Billing: []result.Billing{{Partition: "cpu", Jobs: 4}}}
	if !r.OK() {
		t.Error("not OK with billing that agrees")
	}
	r.Billing = append(r.Billing, result.Billing{Partition: "gpu", Jobs: 3, Mismatched: 1, Example: &result.BillingExample{Job: 42, Recorded: 20, Expected: 22}})
	if r.OK() {
		t.Error("OK with a job billed otherwise")
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), `billing: partition "gpu": 1 of 3 jobs`) || strings.Contains(b.String(), `"cpu"`) {
		t.Errorf("table %q, %v", b.String(), err)
	}
}
