package refresh

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestReadyAfterPublish: /-/ready is 200 only once the computation of a
// good refresh is published (it was set by the refresh, up to 85 ms
// before the first data could be scraped), and stays 503 while the
// database is down.
func TestReadyAfterPublish(t *testing.T) {
	tree := fairshare.Synthetic(20, 3, 1)
	now := time.Unix(2e9, 0)
	col := collector.New()
	e := &Exporter{Conf: &slurmconf.Config{ClusterName: "c"}, Collector: col, Log: zerolog.Nop(),
		now:      func() time.Time { return now },
		clusters: map[string]*clusterState{},
		sources:  map[string]result.Source{"db": {}},
		stages:   map[string]result.Stage{},
	}
	e.publish()
	if e.Ready() {
		t.Fatal("ready with the database down and nothing published")
	}
	// what a good refresh leaves, before its publish
	e.clusters["c"] = &clusterState{last: inputs(tree, fairshare.AlgorithmFairTree)}
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
	e := &Exporter{Log: zerolog.New(&logs)}
	for _, round := range [][]string{{"bad row 1", "bad row 2"}, {"bad row 1", "bad row 2"}, {"bad row 2"}, {"bad row 1", "bad row 2"}} {
		e.warnChanged("c", round)
	}
	if n1, n2 := strings.Count(logs.String(), "bad row 1"), strings.Count(logs.String(), "bad row 2"); n1 != 2 || n2 != 1 {
		t.Errorf("bad row 1 logged %d times (want 2: it went away and came back), bad row 2 %d times (want 1):\n%s", n1, n2, logs.String())
	}
}

// TestReportBeforeSettingsChange: a report read before slurm.conf's
// priority settings changed is not compared with them (slurmctld may have
// taken them up since: from 23.11 scontrol reconfigure restarts it), and
// the reported source is not called down for it; the next report is.
func TestReportBeforeSettingsChange(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	conf := &slurmconf.Config{ClusterName: "c", PriorityCalcPeriod: time.Minute}
	e := &Exporter{Conf: conf, StaleAfter: time.Hour, now: func() time.Time { return now }, stages: map[string]result.Stage{}}
	e.report = &reportState{at: now.Add(-time.Minute)}
	if e.freshReport() == nil {
		t.Fatal("a report of a minute ago, settings unchanged: not compared")
	}
	changed := *conf
	changed.PriorityFlagNames = []string{"NO_FAIR_TREE"}
	e.LoadConf = func() (*slurmconf.Config, error) { return &changed, nil }
	e.reloadConf()
	if e.freshReport() != nil {
		t.Error("a report read before the settings changed is compared with them")
	}
	e.report = &reportState{at: now.Add(time.Second)}
	if e.freshReport() == nil {
		t.Error("a report read after the settings changed is not compared")
	}
}
