package sshare

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRun: the text listing parsed as sshare prints it; sshare's own
// failure is reported with its stderr before what its output made of the
// parse, and output that does not parse is an error naming the command.
func TestRun(t *testing.T) {
	capture, err := filepath.Abs("../testdata/slurm-24.11/sshare-a-l-P-m.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	dir := fakeSshare(t, "cat "+capture+"\n")
	out, err := Run(context.Background(), "/etc/slurm/test.conf")
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if string(args) != "/etc/slurm/test.conf\n-a\n-l\n-P\n-m\n" || len(out.Rows) != len(want.Rows) || out.Rows[len(out.Rows)-1] != want.Rows[len(want.Rows)-1] {
		t.Errorf("SLURM_CONF and arguments %q, %d rows, want %d", args, len(out.Rows), len(want.Rows))
	}

	fakeSshare(t, "echo 'sshare: error: Unable to contact slurm controller' >&2\nexit 1\n")
	if _, err := Run(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Errorf("failing sshare: %v", err)
	}

	fakeSshare(t, "echo 'not|a|listing'\nhead -c 200000 /dev/zero | tr '\\\\0' x\necho\nexit 1\n")
	if _, err := Run(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("failing sshare with output that does not parse: %v", err)
	}

	fakeSshare(t, "echo 'Account|User|RawShares'\necho 'root|x|y|z'\n")
	if _, err := Run(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "output of sshare -a -l -P -m") {
		t.Errorf("output that does not parse: %v", err)
	}
}

// TestParseBootTime reads BOOT_TIME from real 24.11.7's `scontrol show
// config` (testdata/slurm-24.11), in local time as scontrol prints it,
// and names what it expected when there is none.
func TestParseBootTime(t *testing.T) {
	f, err := os.Open("../testdata/slurm-24.11/scontrol-show-config.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseBootTime(f)
	if want := time.Date(2026, 11, 22, 3, 40, 25, 0, time.Local); err != nil || !got.Equal(want) {
		t.Errorf("BOOT_TIME: %v, %v; want %v", got, err, want)
	}
	if _, err := ParseBootTime(strings.NewReader("ClusterName = x\n")); err == nil || !strings.Contains(err.Error(), "scontrol show config") {
		t.Errorf("no BOOT_TIME: error %v, want one naming scontrol show config", err)
	}
	if _, err := ParseBootTime(strings.NewReader("BOOT_TIME = yesterday\n")); err == nil || !strings.Contains(err.Error(), "yesterday") {
		t.Errorf("bad BOOT_TIME: error %v, want one quoting it", err)
	}
}
