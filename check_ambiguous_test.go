package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// TestCheckAmbiguousReport: check in database mode on real Slurm 22.05's
// database, where erin has two associations in account exp that differ
// only by partition, refuses (exit 2) the `sshare -a -l -P` capture taken
// without -m, whose two exp|erin rows could be either, naming them and the
// listing to take instead; the -m capture of the same moment is compared.
func TestCheckAmbiguousReport(t *testing.T) {
	t.Setenv(cli.DSNEnv, "")
	srv := mariadbtest.Start(t, "")
	srv.Load("acct", filepath.Join("testdata", "slurm-22.05", "slurm_acct_db.sql.gz"))
	srv.CreateReader("reader", "s3cret", "acct")
	dir := t.TempDir()
	dsn := testenv.WriteFile(t, dir, "dsn", srv.DSN("reader", "s3cret", "acct"))
	conf := testenv.WriteFile(t, dir, "slurm.conf", "ClusterName=h2f1e87f7\nPriorityType=priority/multifactor\nPriorityFlags=FAIR_TREE\nPriorityDecayHalfLife=7-0\nPriorityCalcPeriod=5\n")
	args := func(capture string) []string {
		return []string{"check", "--dsn-file", dsn, "--slurm-conf", conf, "--slurm.state-dir", dir, "--output", "json",
			"--sshare-file", filepath.Join("testdata", "slurm-22.05", capture)}
	}

	code, stdout, stderr := runCLI(t, args("idle-fairtree.txt")...)
	var f struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if code != exitError || json.Unmarshal([]byte(stdout), &f) != nil || f.ExitCode != exitError {
		t.Fatalf("without -m: exit %d, stdout %q, want exit %d and a JSON error (stderr %s)", code, stdout, exitError, stderr)
	}
	for _, want := range []string{"line 21", "line 22", "exp/erin/p1", "exp/erin/p2", "sshare -a -l -P -m"} {
		if !strings.Contains(f.Error, want) || !strings.Contains(stderr, want) {
			t.Errorf("error %q (stderr %q) does not name %q", f.Error, stderr, want)
		}
	}
	if code, stdout, stderr := runCLI(t, args("idle-fairtree-m.txt")...); code == exitError {
		t.Errorf("with -m: exit %d, want a comparison: %s %s", code, stdout, stderr)
	}
}
