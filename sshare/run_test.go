package sshare

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
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

// fakeSshare puts an sshare script first in PATH; it records its
// SLURM_CONF and arguments in dir/args.
func fakeSshare(t *testing.T, script string) (dir string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	dir = t.TempDir()
	script = "#!/bin/sh\nprintf '%s\\n' \"$SLURM_CONF\" \"$@\" > " + filepath.Join(dir, "args") + "\n" + script
	if err := os.WriteFile(filepath.Join(dir, "sshare"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

func TestRunJSON(t *testing.T) {
	capture, err := filepath.Abs("../testdata/slurm-25.11/sshare-json-a-l-m.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := fakeSshare(t, "cat "+capture+"\n")
	out, err := RunJSON(context.Background(), "/etc/slurm/test.conf")
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if string(args) != "/etc/slurm/test.conf\n--json\n-a\n-l\n-m\n" || len(out.Rows) != 17 {
		t.Errorf("SLURM_CONF and arguments %q, %d rows", args, len(out.Rows))
	}

	// sshare --json puts slurmctld's refusal in the document, not on stderr.
	failed := strings.Replace(doc(), `"errors":[]`, `"errors":[{"error":"Unable to contact slurm controller"}]`, 1)
	fakeSshare(t, "echo '"+failed+"'\nexit 1\n")
	if _, err := RunJSON(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Errorf("failing sshare: %v", err)
	}
}

// TestRunKillsGroup: when ctx ends, sshare and the children a wrapper
// script started are killed, and Run returns at once; a child that left
// the process group (setsid) and holds the pipes keeps Run waiting only
// WaitDelay.
func TestRunKillsGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("takes WaitDelay, 5 s")
	}
	for _, tc := range []struct {
		name, child string
		most        time.Duration
		run         func(context.Context, string) (*shares.Table, error)
	}{
		{"child in the group", "sleep 30 &", 2 * time.Second, RunJSON},
		{"child out of the group", "setsid sleep 30 &", 8 * time.Second, RunJSON},
		{"text, child in the group", "sleep 30 &", 2 * time.Second, Run},
		{"text, child out of the group", "setsid sleep 30 &", 8 * time.Second, Run},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			fakeSshare(t, "echo $$ > "+pidFile+"\n"+tc.child+"\necho $! >> "+pidFile+"\nsleep 30\n")
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := tc.run(ctx, "x")
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "deadline exceeded") || took > tc.most {
				t.Errorf("after %v (most %v): %v", took, tc.most, err)
			}
			b, _ := os.ReadFile(pidFile)
			pids := strings.Fields(string(b))
			if len(pids) != 2 {
				t.Fatalf("pid file %q", b)
			}
			if _, err := os.Stat("/proc/" + pids[0]); err == nil {
				t.Errorf("sshare (pid %s) still running or not reaped", pids[0])
			}
			inGroup := !strings.HasPrefix(tc.child, "setsid")
			// The pipe closes as a killed child closes its files, a moment
			// before it turns zombie: give it that moment.
			running := testenv.Running(pids[1])
			for deadline := time.Now().Add(time.Second); running && inGroup && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				running = testenv.Running(pids[1])
			}
			if running == inGroup {
				t.Errorf("child (pid %s) running: %v, want %v", pids[1], running, !inGroup)
			}
			if pid, err := strconv.Atoi(pids[1]); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

// fuzzSeed shrinks a capture to its first two rows, root (NO_VAL level)
// and root's user (infinite level), without the tres lists ParseJSON
// ignores: the fuzzer minimizes every new input in time quadratic in its
// length, and at 80 kB, or even 2 kB, that stalls it.
func fuzzSeed(t testing.TB, capture []byte) []byte {
	var doc struct {
		Shares struct {
			Shares []map[string]json.RawMessage `json:"shares"`
		} `json:"shares"`
		Meta struct {
			Slurm json.RawMessage `json:"slurm"`
		} `json:"meta"`
		Errors json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(finite(capture), &doc); err != nil {
		t.Fatal(err)
	}
	rows := doc.Shares.Shares[:2]
	for _, r := range rows {
		delete(r, "tres")
	}
	doc.Shares.Shares = rows
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte("1e999999"), []byte("Infinity"))
}
