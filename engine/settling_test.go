package engine

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// TestSettlingAfterRestart: after slurmctld starts, the values it computes
// at a pass are not judged until a pass is seen between two reads of the
// new boot, and a fault is judged again after it.
func TestSettlingAfterRestart(t *testing.T) {
	tree := fairshare.Synthetic(300, 4, 5)
	base := shares.Of(tree, tree.FairTree())
	decayed := func(f float64) *shares.Table {
		o := *base
		o.Rows = slices.Clone(base.Rows)
		for i := range o.Rows {
			o.Rows[i].RawUsage *= f
		}
		return &o
	}
	e := NewTracker(TrackerConfig{Period: time.Minute, Confirm: 1})
	now := time.Unix(1_800_000_000, 0)
	boot := now.Add(-time.Hour)
	steps := []struct {
		boot         time.Time
		out          *shares.Table
		pass, settle bool
	}{
		{boot, decayed(1), false, false},
		{boot, decayed(0.99), true, false},
		{now.Add(30 * time.Second), decayed(0.98), true, true}, // restarted: a pass across the restart does not settle it
		{now.Add(30 * time.Second), decayed(0.98), false, true},
		{now.Add(30 * time.Second), decayed(0.97), true, false},
	}
	for i, s := range steps {
		at := now.Add(time.Duration(i) * 40 * time.Second)
		r := &Reading{Start: at, End: at.Add(time.Second), Boot: s.boot, Out: s.out}
		e.observe(r, true)
		if r.Pass != s.pass || r.Settling != s.settle {
			t.Errorf("read %d: pass %v settling %v, want %v %v", i, r.Pass, r.Settling, s.pass, s.settle)
		}
	}
	fresh := NewTracker(TrackerConfig{Period: time.Minute, Confirm: 1})
	r := &Reading{Start: now, End: now.Add(time.Second), Boot: now.Add(-90 * time.Second), Out: base}
	if fresh.observe(r, true); !r.Settling {
		t.Error("first read 90 s after slurmctld started: not settling")
	}

	// a report with another algorithm's factors: flagged unless settling
	wrong := shares.Of(tree, tree.Classic(fairshare.ClassicOptions{Dampening: 1}))
	for _, settling := range []bool{false, true} {
		in := &build.Inputs{Name: "c", Settings: build.Settings{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1},
			Database: build.Database{Tree: tree, Computed: time.Unix(1e9, 0)}, Options: build.Options{Tolerance: drift.DefaultTolerance}}
		in.Reported = &build.Reported{Out: wrong, At: in.Computed, Settling: settling}
		cl, err := build.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		d := cl.Drift[slices.IndexFunc(cl.Drift, func(d result.Drift) bool { return d.Kind == result.DriftFormula && d.Value == "fairshare" })]
		if settling && (d.Beyond != 0 || !math.IsInf(d.Bound, 1) || d.Max == 0) {
			t.Errorf("settling: %+v, want drift measured, bound +Inf, nothing beyond", d)
		}
		if !settling && d.Beyond == 0 {
			t.Errorf("settled: wrong factors not flagged: %+v", d)
		}
	}
}
