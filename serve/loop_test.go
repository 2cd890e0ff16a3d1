package serve

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
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

// TestReportBeforeSettingsChange: a report read before slurm.conf's
// priority settings changed is not compared with them (slurmctld may have
// taken them up since: from 23.11 scontrol reconfigure restarts it), and
// the reported source is not called down for it; the next report is.
func TestReportBeforeSettingsChange(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	conf := &slurmconf.Config{ClusterName: "c", PriorityCalcPeriod: time.Minute}
	changed := *conf
	changed.PriorityFlagNames = []string{"NO_FAIR_TREE"}
	reload := engine.WithReload(func() (*slurmconf.Config, error) { return &changed, nil })
	e := testLoop(conf, nil, &now, Schedule{StaleAfter: time.Hour}, reload)
	e.report = &engine.Reading{At: now.Add(-time.Minute)}
	if e.freshReport() == nil {
		t.Fatal("a report of a minute ago, settings unchanged: not compared")
	}
	e.refreshAll(context.Background(), now) // reads slurm.conf; the database is not there
	if e.freshReport() != nil {
		t.Error("a report read before the settings changed is compared with them")
	}
	e.report = &engine.Reading{At: now.Add(time.Second)}
	if e.freshReport() == nil {
		t.Error("a report read after the settings changed is not compared")
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
	if cs.recovery != first || cs.recovering || e.e.Stages()[result.StageForecast].Errors != 1 {
		t.Fatalf("after a failed computation: recovery %v (want the last), recovering %v, errors %d", cs.recovery, cs.recovering, e.e.Stages()[result.StageForecast].Errors)
	}
	// one under way: the next refresh does not start another
	cs.recovering = true
	e.recover(context.Background(), cs, &build.Inputs{Name: "c", Database: build.Database{Computed: time.Unix(1_900_000_000, 0)}})
	if e.e.Stages()[result.StageForecast].Errors != 1 {
		t.Fatal("a computation started while one was under way")
	}
}

// TestRecoveryEvery: the recovery metric comes every RecoveryInterval
// while it costs less than RecoveryBudget of the refreshes in between, and
// less often when it costs more (11k associations under Fair Tree with
// many job ends: 0.72 s against 8.75 ms refreshes, docs/performance.md).
func TestRecoveryEvery(t *testing.T) {
	e := NewLoop(engine.New(&slurmconf.Config{}, ""), nil, Schedule{Interval: time.Minute, RecoveryInterval: 4 * time.Hour})
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
func testLoop(conf *slurmconf.Config, pub Publisher, now *time.Time, s Schedule, opts ...engine.Option) *Loop {
	wall := func() time.Time { return *now }
	e := engine.New(conf, "", append(opts, engine.WithWall(wall), engine.WithClock(engine.Clock{Now: wall, Speed: 1}))...)
	return NewLoop(e, pub, s)
}

// TestStaleReportWithdrawn: a report older than StaleAfter is not
// published, and the reported source is down at that moment.
func TestStaleReportWithdrawn(t *testing.T) {
	tree := fairshare.Synthetic(100, 3, 1)
	now := time.Unix(2e9, 0)
	conf := &slurmconf.Config{ClusterName: "c", PriorityCalcPeriod: 5 * time.Minute}
	col := collector.New()
	tracker := engine.NewTracker(engine.TrackerConfig{Read: func(context.Context) (*shares.Table, error) { return nil, errors.New("not called") }})
	e := testLoop(conf, col, &now, Schedule{StaleAfter: 15 * time.Minute}, engine.WithTracker(tracker))
	e.served["c"] = &served{last: inputs(tree, fairshare.AlgorithmFairTree)}
	e.sources = map[string]result.Source{"db": {Up: true, LastSuccess: now}, "reported": {Up: true, LastSuccess: now.Add(-10 * time.Minute)}}
	at := now.Add(-10 * time.Minute)
	e.report = &engine.Reading{Out: shares.Of(tree, tree.FairTree()), At: at}
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
