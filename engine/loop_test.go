package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TestReadyAfterPublish: /-/ready is 200 only once the computation of a
// good refresh is published (it was set by the refresh, up to 85 ms
// before the first data could be scraped), and stays 503 while the
// database is down.
func TestReadyAfterPublish(t *testing.T) {
	tree := fairshare.Synthetic(20, 3, 1)
	now := time.Unix(2e9, 0)
	col := collector.New()
	e := testLoop(&slurmconf.Config{ClusterName: "c"}, col, &now, Schedule{})
	e.publish()
	if e.Ready() {
		t.Fatal("ready with the database down and nothing published")
	}
	// what a good refresh leaves, before its publish
	e.served["c"] = &served{last: inputs(tree, fairshare.AlgorithmFairTree)}
	e.source("db", true, now)
	if e.Ready() {
		t.Fatal("ready before the refresh's computation was published")
	}
	e.publish()
	if !e.Ready() || col.Current() == nil || len(col.Current().Clusters) != 1 {
		t.Fatalf("not ready after publishing a good refresh")
	}
}

// TestWarnChanged: a data problem is logged when it appears, not again at
// every refresh while it stays; one that goes and comes back is logged
// again.
func TestWarnChanged(t *testing.T) {
	var logs bytes.Buffer
	e := New(&slurmconf.Config{}, "", WithLogger(zerolog.New(&logs)))
	bad := func(msgs ...string) []problem {
		var ps []problem
		for _, m := range msgs {
			ps = append(ps, problemOf(errors.New(m)))
		}
		return ps
	}
	for _, round := range [][]problem{bad("bad row 1", "bad row 2"), bad("bad row 1", "bad row 2"), bad("bad row 2"), bad("bad row 1", "bad row 2")} {
		e.warnChanged("c", round)
	}
	if n1, n2 := strings.Count(logs.String(), "bad row 1"), strings.Count(logs.String(), "bad row 2"); n1 != 2 || n2 != 1 {
		t.Errorf("bad row 1 logged %d times (want 2: it went away and came back), bad row 2 %d times (want 1):\n%s", n1, n2, logs.String())
	}
	// a problem whose message carries a decaying value is one problem
	// (issue 33: 20 warnings a refresh, one per association and value)
	logs.Reset()
	for _, v := range []float64{-120, -118.5, -117} {
		e.warnChanged("c", []problem{problemOf(&usage.Problem{Identity: "negative usage of bob", Err: fmt.Errorf("usage of bob is %g", v)})})
	}
	if n := strings.Count(logs.String(), "usage of bob"); n != 1 {
		t.Errorf("a problem whose value moved logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestReportBeforeSettingsChange: a report read before slurm.conf's
// priority settings changed is not compared with them (slurmctld may have
// taken them up since: from 23.11 scontrol reconfigure restarts it), and
// the reported source is not called down for it; the next report is.
func TestReportBeforeSettingsChange(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	conf := &slurmconf.Config{ClusterName: "c", PriorityCalcPeriod: time.Minute}
	changed := *conf
	changed.PriorityFlagNames = []string{"NO_FAIR_TREE"}
	reload := WithReload(func() (*slurmconf.Config, error) { return &changed, nil })
	e := testLoop(conf, nil, &now, Schedule{StaleAfter: time.Hour}, reload)
	e.report = &Reading{At: now.Add(-time.Minute)}
	if e.freshReport() == nil {
		t.Fatal("a report of a minute ago, settings unchanged: not compared")
	}
	e.refreshAll(context.Background(), now) // reads slurm.conf; the database is not there
	if e.freshReport() != nil {
		t.Error("a report read before the settings changed is compared with them")
	}
	e.report = &Reading{At: now.Add(time.Second)}
	if e.freshReport() == nil {
		t.Error("a report read after the settings changed is not compared")
	}
}

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
		in := inputs(tree, fairshare.AlgorithmFairTree)
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

// TestRecovered: a computation handed back from its goroutine replaces
// the recovery metric and lets the next one start; a failed one keeps
// the last, with its moment, and counts an error.
func TestRecovered(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	e := testLoop(&slurmconf.Config{}, nil, &now, Schedule{RecoveryInterval: time.Hour, ForecastWindow: time.Hour})
	first := &result.Recovery{Computed: now}
	cs := &served{recovering: true}
	e.served["c"] = cs
	e.recovered(recoveryResult{name: "c", r: first, took: time.Second})
	if cs.recovery != first || cs.recovering {
		t.Fatalf("after a good computation: recovery %v, recovering %v", cs.recovery, cs.recovering)
	}
	cs.recovering = true
	e.recovered(recoveryResult{name: "c", err: context.DeadlineExceeded})
	if cs.recovery != first || cs.recovering || e.e.stages[result.StageForecast].Errors != 1 {
		t.Fatalf("after a failed computation: recovery %v (want the last), recovering %v, errors %d", cs.recovery, cs.recovering, e.e.stages[result.StageForecast].Errors)
	}
	// one under way: the next refresh does not start another
	cs.recovering = true
	e.recover(context.Background(), cs, &build.Inputs{Name: "c", Database: build.Database{Computed: time.Unix(1_900_000_000, 0)}})
	if e.e.stages[result.StageForecast].Errors != 1 {
		t.Fatal("a computation started while one was under way")
	}
}

// TestRecoveryEvery: the recovery metric comes every RecoveryInterval
// while it costs less than RecoveryBudget of the refreshes in between, and
// less often when it costs more (11k associations under Fair Tree with
// many job ends: 0.72 s against 8.75 ms refreshes, docs/performance.md).
func TestRecoveryEvery(t *testing.T) {
	e := NewLoop(New(&slurmconf.Config{}, ""), nil, Schedule{Interval: time.Minute, RecoveryInterval: 4 * time.Hour})
	for _, c := range []struct {
		refresh, recovery time.Duration
		want              time.Duration
	}{
		{0, 0, 4 * time.Hour}, // nothing measured yet
		{8750 * time.Microsecond, 130 * time.Millisecond, 4 * time.Hour}, // 74 refreshes' worth of budget: under 240
		{8750 * time.Microsecond, 720 * time.Millisecond, 24686 * time.Second},
	} {
		cs := &served{refreshTook: c.refresh, recoveryTook: c.recovery}
		got := e.recoveryEvery(cs)
		if d := got - c.want; d < -time.Second || d > time.Second {
			t.Errorf("refresh %v, recovery %v: every %v, want %v", c.refresh, c.recovery, got, c.want)
		}
		// the budget holds: the recovery's cost over the refreshes in between
		if c.refresh > 0 {
			share := float64(c.recovery) / (got.Minutes() * float64(c.refresh))
			if share > RecoveryBudget+1e-6 {
				t.Errorf("refresh %v, recovery %v: every %v costs %.2f of the refreshes", c.refresh, c.recovery, got, share)
			}
		}
	}
}

// testLoop is a loop over an engine of conf whose clock reads *now.
func testLoop(conf *slurmconf.Config, pub Publisher, now *time.Time, s Schedule, opts ...Option) *Loop {
	e := New(conf, "", opts...)
	e.now = func() time.Time { return *now }
	e.o.clock = Clock{Now: e.now, Speed: 1}
	return NewLoop(e, pub, s)
}

// TestStaleReportWithdrawn: a report older than StaleAfter is not
// published, and the reported source is down at that moment.
func TestStaleReportWithdrawn(t *testing.T) {
	tree := fairshare.Synthetic(100, 3, 1)
	now := time.Unix(2e9, 0)
	conf := &slurmconf.Config{ClusterName: "c", PriorityCalcPeriod: 5 * time.Minute}
	col := collector.New()
	tracker := NewTracker(TrackerConfig{Read: func(context.Context) (*shares.Table, error) { return nil, errors.New("not called") }})
	e := testLoop(conf, col, &now, Schedule{StaleAfter: 15 * time.Minute}, WithTracker(tracker))
	e.served["c"] = &served{last: inputs(tree, fairshare.AlgorithmFairTree)}
	e.sources = map[string]result.Source{"db": {Up: true, LastSuccess: now}, "reported": {Up: true, LastSuccess: now.Add(-10 * time.Minute)}}
	at := now.Add(-10 * time.Minute)
	e.report = &Reading{Out: shares.Of(tree, tree.FairTree()), At: at}
	e.served["c"].reportDB, e.served["c"].reportFor = tree, at
	e.publish()
	cl := col.Current().Clusters[0]
	if len(cl.Drift) == 0 || math.IsNaN(cl.Assocs[1].ReportedUsage) || !col.Current().Sources["reported"].Up {
		t.Fatalf("a 10-minute-old report is not served: drift %v, up %v", cl.Drift, col.Current().Sources["reported"].Up)
	}
	now = now.Add(6 * time.Minute)
	e.publish()
	cl = col.Current().Clusters[0]
	if len(cl.Drift) != 0 || !math.IsNaN(cl.Assocs[1].ReportedUsage) {
		t.Errorf("a 16-minute-old report is still served")
	}
	if col.Current().Sources["reported"].Up {
		t.Errorf("reported source up with its report withdrawn")
	}
}

// inputs are a refresh's inputs of t, computed at 1e9, as the loop keeps
// them.
func inputs(t *fairshare.Tree, alg fairshare.Algorithm) *build.Inputs {
	return &build.Inputs{Name: "c", Settings: build.Settings{Algorithm: alg, Dampening: 1},
		Database: build.Database{Tree: t, Computed: time.Unix(1e9, 0)}, Options: build.Options{Tolerance: drift.DefaultTolerance}}
}
