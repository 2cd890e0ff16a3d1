package e2e

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
)

// TestOnePipeline: serve, check's database mode and explain compute one
// cluster alike. On the real Slurm 24.11 database, compared with the
// sshare capture taken beside it (under a half-life of a year the
// database's usage is far from the capture's, so most associations
// drift: a comparison with something to find), all three give the same
// factors, and serve's drift counts are check's, value by value.
func TestOnePipeline(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	f.fake("scontrol", `echo "BOOT_TIME               = 2026-11-01T00:00:00"`)
	abs, err := filepath.Abs(filepath.Join("..", "testdata", "slurm-24.11", "sshare-a-l-P-m.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.fake("sshare", "cat "+abs)
	run := func(args ...string) (int, []byte) {
		code, out, errOut := runExporterEnv(t, f.env(), args...)
		if code == exitError {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return code, []byte(out)
	}

	s := f.serve("--reported.interval", "2s")
	m := s.waitScrape("a report compared", 30e9, func(m map[string]float64) bool {
		_, ok := m[series("slurmdbd_fairshare_drift_beyond_tolerance_associations", "kind", "usage", "slurm_cluster", "v2411", "value", "raw_usage")]
		return ok
	})
	code, out := run("check", "--output", "json", "--dsn-file", f.dsnFile, "--slurm-conf", f.conf)
	var rep drift.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if rep.Formula == nil {
		t.Fatal("check's database mode has no formula part")
	}
	if (code == 0) != rep.OK() {
		t.Errorf("check exited %d, its report says ok=%v", code, rep.OK())
	}

	beyond := func(kind, value string) float64 {
		return m[series("slurmdbd_fairshare_drift_beyond_tolerance_associations", "kind", kind, "slurm_cluster", "v2411", "value", value)]
	}
	notes := func(r *drift.Report, word string) (n float64) {
		for _, e := range r.Associations {
			for _, note := range e.Notes {
				if strings.HasPrefix(note, word) {
					n++
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		kind, value string
		check       float64
	}{
		{"usage", "raw_usage", float64(rep.Summary.Beyond["raw_usage"])},
		{"usage", "fairshare", float64(rep.Summary.Beyond["fairshare"])},
		{"usage", "associations", float64(rep.Summary.Counts[drift.StatusOnlyReported] + rep.Summary.Counts[drift.StatusOnlyComputed])},
		{"usage", "shares", notes(&rep, "shares")},
		{"usage", "rank", notes(&rep, "rank")},
		{"formula", "norm_shares", float64(rep.Formula.Summary.Beyond["norm_shares"])},
		{"formula", "norm_usage", float64(rep.Formula.Summary.Beyond["norm_usage"])},
		{"formula", "effective_usage", float64(rep.Formula.Summary.Beyond["effective_usage"])},
		{"formula", "fairshare", float64(rep.Formula.Summary.Beyond["fairshare"])},
		{"formula", "level_fs", float64(rep.Formula.Summary.Beyond["level_fs"])},
		{"formula", "rank", notes(rep.Formula, "rank")},
	} {
		if got := beyond(c.kind, c.value); got != c.check {
			t.Errorf("%s drift of %s: serve counts %v associations beyond tolerance, check %v", c.kind, c.value, got, c.check)
		}
	}
	if beyond("usage", "raw_usage") == 0 {
		t.Error("no usage drift: the fixture no longer tests the comparison")
	}

	// the factors: serve's metric, check's computed side, explain's
	for _, e := range rep.Associations {
		if e.User == "" || e.Computed == nil {
			continue
		}
		served := m[series("slurmdbd_fairshare_factor", "account", e.Account, "algorithm", "fair_tree", "parent", e.Parent, "partition", e.Partition, "slurm_cluster", "v2411", "user", e.User)]
		if d := math.Abs(served - float64(e.Computed.FairShare)); d > 1e-6 {
			t.Errorf("%s/%s: factor %v in serve, %v in check", e.Account, e.User, served, e.Computed.FairShare)
		}
		_, out := run("explain", "--output", "json", "--user", e.User, "--account", e.Account, "--dsn-file", f.dsnFile, "--slurm-conf", f.conf)
		var exps []struct {
			Factors map[string]drift.Num `json:"factors"`
		}
		if err := json.Unmarshal(out, &exps); err != nil || len(exps) == 0 {
			t.Fatalf("explain %s: %v\n%s", e.User, err, out)
		}
		if d := math.Abs(float64(exps[0].Factors["fair_tree"]) - float64(e.Computed.FairShare)); d > 1e-6 {
			t.Errorf("%s/%s: factor %v in explain, %v in check", e.Account, e.User, exps[0].Factors["fair_tree"], e.Computed.FairShare)
		}
	}
}
