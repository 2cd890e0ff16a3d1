package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// Two consecutive decay passes of real slurmctld 22.05 in classic mode
// while jobs ran, and an idle capture (testdata/README.md).
const (
	running1 = "testdata/slurm-22.05/running-classic-1.txt"
	running2 = "testdata/slurm-22.05/running-classic-2.txt"
	idle     = "testdata/slurm-22.05/idle-classic.txt"
)

// seriesOut is check's JSON for more than one snapshot.
type seriesOut struct {
	Snapshots []seriesSnapshot `json:"snapshots"`
	OK        bool             `json:"ok"`
	Drifting  []int            `json:"drifting"`
}

type seriesSnapshot struct {
	Index        int        `json:"index"`
	File         string     `json:"file"`
	Line         int        `json:"line"`
	Time         *time.Time `json:"time"`
	LagReference *int       `json:"lag_reference"`
	OK           bool       `json:"ok"`
	drift.Report
}

// checkSeries runs check --output json on the files and decodes a series.
func checkSeries(t *testing.T, args ...string) (int, *seriesOut) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"check", "--output", "json"}, args...)...)
	if code == exitError {
		t.Fatalf("check %v exited %d: %s", args, code, stderr)
	}
	var s seriesOut
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || s.Snapshots == nil {
		t.Fatalf("check %v --output json: %v: want {\"snapshots\": [...]}\n%s", args, err, stdout)
	}
	if (code == 0) != s.OK || s.OK != (len(s.Drifting) == 0) {
		t.Errorf("exit %d, ok %v, drifting %v", code, s.OK, s.Drifting)
	}
	for i, snap := range s.Snapshots {
		if snap.Index != i+1 || snap.OK != snap.Report.OK() {
			t.Errorf("snapshot %d: index %d, ok %v, its report's %v", i+1, snap.Index, snap.OK, snap.Report.OK())
		}
	}
	return code, &s
}

func files(args ...string) []string {
	var out []string
	for _, f := range args {
		out = append(out, "--sshare-file", f)
	}
	return out
}

// writeFile writes text to a file of the test's temporary directory.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	return testenv.WriteFile(t, t.TempDir(), name, text)
}

// marked is the captures as a watch loop writes them: each headed by
// '## <unix seconds>', the first at t0, then every step.
func marked(t *testing.T, t0, step int64, captures ...string) string {
	t.Helper()
	var b strings.Builder
	for i, c := range captures {
		fmt.Fprintf(&b, "## %d\n%s", t0+int64(i)*step, readTestdata(t, strings.TrimPrefix(c, "testdata/")))
	}
	return b.String()
}

// lagRef is a snapshot's lag reference, 0 for none.
func lagRef(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// TestCheckSeriesMarkedFile: one file of snapshots each headed by
// '## <unix seconds>' checks as the files given one by one, with the
// snapshots' times.
func TestCheckSeriesMarkedFile(t *testing.T) {
	const t0 = 1795319418
	f := writeFile(t, "series.txt", "\n"+marked(t, t0, 300, running1, running2, running2))
	code, m := checkSeries(t, "--sshare-file", f)
	wantCode, want := checkSeries(t, files(running1, running2, running2)...)
	if code != wantCode || len(m.Snapshots) != len(want.Snapshots) {
		t.Fatalf("exit %d, %d snapshots from the marked file; %d, %d from the files", code, len(m.Snapshots), wantCode, len(want.Snapshots))
	}
	line := 2
	for i := range m.Snapshots {
		got, exp := &m.Snapshots[i], &want.Snapshots[i]
		a, _ := json.Marshal(got.Report)
		b, _ := json.Marshal(exp.Report)
		if string(a) != string(b) || lagRef(got.LagReference) != lagRef(exp.LagReference) || got.OK != exp.OK {
			t.Errorf("snapshot %d differs:\n%s\n%s", i+1, a, b)
		}
		if at := time.Unix(t0+int64(i)*300, 0).UTC(); got.Time == nil || !got.Time.Equal(at) || got.File != f || got.Line != line {
			t.Errorf("snapshot %d: time %v, file %s line %d: want %v, %s line %d", i+1, got.Time, got.File, got.Line, at, f, line)
		}
		line += 1 + 27
	}
	// a marked file and a plain one, in time order
	code, mixed := checkSeries(t, "--sshare-file", writeFile(t, "first.txt", marked(t, t0, 300, running1)), "--sshare-file", running2)
	if code != 0 || len(mixed.Snapshots) != 2 || lagRef(mixed.Snapshots[1].LagReference) != 1 {
		t.Errorf("marked then plain: exit %d, %+v", code, mixed.Snapshots)
	}
}

// TestCheckSeriesOneSnapshot: one snapshot, marked or not, prints the one
// report check always printed, byte for byte.
func TestCheckSeriesOneSnapshot(t *testing.T) {
	f := writeFile(t, "one.txt", marked(t, 1795319418, 300, idle))
	for _, format := range []string{"table", "json"} {
		code, got, stderr := runCLI(t, "check", "--output", format, "--sshare-file", f)
		wantCode, want, _ := runCLI(t, "check", "--output", format, "--sshare-file", idle)
		if code != wantCode || got != want || code != 0 {
			t.Errorf("%s: exit %d (%s), want %d:\n%s\nwant\n%s", format, code, stderr, wantCode, got, want)
		}
	}
	// an empty snapshot (sshare failed in the loop) is skipped
	f = writeFile(t, "gap.txt", "## 1795319118\n\n"+marked(t, 1795319418, 300, idle))
	if code, got, _ := runCLI(t, "check", "--sshare-file", f); code != 0 || strings.Contains(got, "snapshot") {
		t.Errorf("a series with an empty snapshot: exit %d\n%s", code, got)
	}
}

// TestCheckCalcPeriod: --priority-calc-period reaches the series: hourly
// snapshots are each other's lag reference only with a period of 20
// minutes or more (check/series_test.go has the rule).
func TestCheckCalcPeriod(t *testing.T) {
	f := writeFile(t, "hourly.txt", marked(t, 1795319418, 3600, running1, running2))
	for _, tc := range []struct {
		args []string
		ref  int
	}{
		{nil, 0},
		{[]string{"--priority-calc-period", "30m"}, 1},
	} {
		code, s := checkSeries(t, append([]string{"--sshare-file", f}, tc.args...)...)
		if second := &s.Snapshots[1]; code != 0 || lagRef(second.LagReference) != tc.ref {
			t.Errorf("%v: exit %d, lag reference %d: want 0, %d", tc.args, code, lagRef(second.LagReference), tc.ref)
		}
	}
}

// TestCheckSeriesErrors: snapshots out of time order, a bad heading, a
// malformed snapshot (named by its heading's line) and a series in
// database mode are errors (exit 2).
func TestCheckSeriesErrors(t *testing.T) {
	good := string(readTestdata(t, "slurm-22.05/idle-classic.txt"))
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"time order", []string{"--sshare-file", writeFile(t, "back.txt", "## 1795319418\n"+good+"## 1795319118\n"+good)}, "time order"},
		{"heading", []string{"--sshare-file", writeFile(t, "bad.txt", "## yesterday\n"+good)}, "unix seconds"},
		{"malformed", []string{"--sshare-file", writeFile(t, "malformed.txt", "## 1795319418\n"+good+"## 1795319718\nAccount|User|RawShares|NormShares|RawUsage\nroot|||0.000000|abc\n")}, "snapshot at line 29"},
		{"database", append([]string{"--dsn-file", writeFile(t, "dsn", "u:p@tcp(127.0.0.1:1)/db")}, files(idle, idle)...), "database mode compares one report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"check"}, tc.args...)...)
			if code != exitError || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q: want %d mentioning %q", code, stderr, exitError, tc.msg)
			}
		})
	}
}
