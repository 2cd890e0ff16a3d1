package serve

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// TestServeRefusesAmbiguousReport: serve given a listing without sshare's
// Partition column (real 22.05 `sshare -a -l -P`) on a tree where erin has
// two associations in exp that differ only by partition (the -m capture
// of the same moment stands for the database) logs an error naming the
// rows and the listing to take, and publishes the database's values
// without a comparison, rather than matching erin's rows in order.
func TestServeRefusesAmbiguousReport(t *testing.T) {
	read := func(name string) *engine.Reading {
		out, err := sshare.ParseFile(filepath.Join("..", "testdata", "slurm-22.05", name))
		if err != nil {
			t.Fatal(err)
		}
		return &engine.Reading{Out: out}
	}
	withPartitions := read("idle-fairtree-m.txt").Out
	db, err := withPartitions.Tree()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file      string
		ambiguous bool
	}{{"idle-fairtree-m.txt", false}, {"idle-fairtree.txt", true}} {
		var logs bytes.Buffer
		now := time.Unix(2e9, 0)
		col := collector.New()
		l := testLoop(&slurmconf.Config{ClusterName: "c"}, col, &now, Schedule{StaleAfter: time.Hour},
			engine.WithLogger(zerolog.New(&logs)), engine.WithTracker(engine.NewTracker(engine.TrackerConfig{Period: time.Minute})))
		in := inputs(db, fairshare.AlgorithmFairTree)
		in.Computed = now
		l.served["c"] = &served{last: in, reportFor: now} // no tree at the report: the Inputs' own is compared
		r := read(tc.file)
		r.At, r.Start, r.End = now, now, now
		l.report = r
		l.publish()
		cl := col.Current().Clusters[0]
		refused := strings.Contains(logs.String(), "sshare -a -l -P -m") && strings.Contains(logs.String(), "exp/erin/p1")
		if refused != tc.ambiguous || (len(cl.Drift) == 0) != tc.ambiguous {
			t.Errorf("%s: refused %v, %d drift series published; want refused %v and no comparison only then:\n%s", tc.file, refused, len(cl.Drift), tc.ambiguous, logs.String())
		}
	}
}
