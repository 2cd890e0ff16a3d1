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

// TestCheckSeriesRunningClassic: two consecutive passes while jobs ran.
// The first, with nothing earlier, cannot tell the one-pass lag from drift
// (lag_not_excluded); the second has the first as its lag reference and
// replays within precision. A third snapshot with the same usage (no pass
// between) keeps the first as reference, as serve does. Nothing drifts.
func TestCheckSeriesRunningClassic(t *testing.T) {
	code, s := checkSeries(t, files(running1, running2, running2)...)
	if code != 0 || len(s.Snapshots) != 3 {
		t.Fatalf("exit %d, %d snapshots: want 0, 3", code, len(s.Snapshots))
	}
	first, second, third := &s.Snapshots[0], &s.Snapshots[1], &s.Snapshots[2]
	if c := first.Summary.Counts; first.LagReference != nil || c[drift.StatusDrift] != 0 || c[drift.StatusLagNotExcluded] != 18 || !strings.Contains(first.Note, "lag") {
		t.Errorf("first: lag reference %d, counts %v, note %q: want none, 18 lag_not_excluded, a note", lagRef(first.LagReference), c, first.Note)
	}
	for i, snap := range []*seriesSnapshot{second, third} {
		if lagRef(snap.LagReference) != 1 || snap.Summary.Counts[drift.StatusOK] != 26 || snap.Note != "" {
			t.Errorf("snapshot %d: lag reference %d, counts %v, note %q: want snapshot 1, 26 ok", i+2, lagRef(snap.LagReference), snap.Summary.Counts, snap.Note)
		}
	}
	if first.Time != nil || !strings.HasSuffix(first.File, "running-classic-1.txt") || first.Line != 0 {
		t.Errorf("first: time %v, file %q, line %d", first.Time, first.File, first.Line)
	}

	code, out, _ := runCLI(t, append([]string{"check"}, files(running1, running2)...)...)
	if code != 0 || !strings.Contains(out, "== snapshot 2: ") || !strings.Contains(out, "series: 2 snapshots, 0 drifting") ||
		!strings.Contains(out, "LAG_NOT_EXCLUDED") || !strings.Contains(out, "snapshot 1\n") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

// TestCheckSeriesFault: a fault in the second snapshot is flagged there,
// the first stays clean: a FairShare changed by hand, and a NormShares
// normalized among siblings as Fair Tree does (PriorityFlags changed
// without a restart), which no lag moves.
func TestCheckSeriesFault(t *testing.T) {
	for _, tc := range []struct{ name, from, to, account, user string }{
		{"fairshare", "   org|gina|1|0.196773|40077|0.122606|0.270783|0.385253|", "   org|gina|1|0.196773|40077|0.122606|0.270783|0.350000|", "org", "gina"},
		{"norm_shares", "   inorg|ivan|1|0.275482|57253|", "   inorg|ivan|1|1.000000|57253|", "inorg", "ivan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := string(readTestdata(t, "slurm-22.05/running-classic-2.txt"))
			if !strings.Contains(text, tc.from) {
				t.Fatalf("no %q in running-classic-2.txt", tc.from)
			}
			faulty := writeFile(t, "faulty.txt", strings.Replace(text, tc.from, tc.to, 1))
			code, s := checkSeries(t, files(running1, faulty)...)
			if code != 1 || len(s.Drifting) != 1 || s.Drifting[0] != 2 || !s.Snapshots[0].OK {
				t.Fatalf("exit %d, drifting %v: want 1, [2]", code, s.Drifting)
			}
			second := &s.Snapshots[1].Report
			if second.Summary.Counts[drift.StatusDrift] != 1 || second.Summary.Beyond[tc.name] != 1 {
				t.Errorf("second: %+v: want one entry drifting on %s", second.Summary, tc.name)
			}
			for _, e := range second.Associations {
				if (e.Status == drift.StatusDrift) != (e.Account == tc.account && e.User == tc.user) {
					t.Errorf("%s/%s: %s", e.Account, e.User, e.Status)
				}
			}
		})
	}
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

// TestCheckLoneRunningClassic: one classic snapshot taken while jobs ran
// cannot tell the one-pass lag from drift: lag not excluded, exit 0; the
// same snapshot with a FairShare that no lag gives (between the replay's
// and the one a pass behind) exits 1.
func TestCheckLoneRunningClassic(t *testing.T) {
	code, rep := checkFile(t, running1)
	if c := rep.Summary.Counts; code != 0 || c[drift.StatusDrift] != 0 || c[drift.StatusLagNotExcluded] != 18 || !strings.Contains(rep.Note, "lag") {
		t.Errorf("exit %d, counts %v, note %q", code, c, rep.Note)
	}
	for _, e := range rep.Associations {
		if e.Status == drift.StatusLagNotExcluded && (e.Lag == nil || len(e.Notes) == 0 || !strings.HasPrefix(e.Notes[0], "lag not excluded")) {
			t.Errorf("%s/%s: lag %v, notes %q", e.Account, e.User, e.Lag, e.Notes)
		}
	}
	code, out, _ := runCLI(t, "check", "--sshare-file", running1)
	if code != 0 || !strings.Contains(out, "lag_not_excluded 18") || !strings.Contains(out, "lag not excluded") {
		t.Errorf("table: exit %d\n%s", code, out)
	}

	const from, to = "   inorg|ivan|1|0.275482|38718|0.174253|0.333859|0.431698|", "   inorg|ivan|1|0.275482|38718|0.174253|0.333859|0.428000|"
	text := string(readTestdata(t, "slurm-22.05/running-classic-1.txt"))
	if !strings.Contains(text, from) {
		t.Fatalf("no %q", from)
	}
	code, rep = checkFile(t, writeFile(t, "faulty.txt", strings.Replace(text, from, to, 1)))
	if code != 1 || rep.Summary.Counts[drift.StatusDrift] != 1 || rep.Summary.Beyond["fairshare"] != 1 {
		t.Errorf("ivan's FairShare 0.428: exit %d, %+v: want 1, ivan drifting", code, rep.Summary)
	}
}

// TestCheckSeriesLagReferenceAge: an earlier snapshot is the lag
// reference only within 3 × --priority-calc-period; beyond, the lag is
// inferred from the report itself (and running-classic-2 alone is lag, not
// drift). 0: whatever the times.
func TestCheckSeriesLagReferenceAge(t *testing.T) {
	f := writeFile(t, "hourly.txt", marked(t, 1795319418, 3600, running1, running2))
	for _, tc := range []struct {
		args []string
		ref  int
	}{
		{nil, 0},
		{[]string{"--priority-calc-period", "30m"}, 1},
		{[]string{"--priority-calc-period", "0"}, 1},
	} {
		code, s := checkSeries(t, append([]string{"--sshare-file", f}, tc.args...)...)
		second := &s.Snapshots[1]
		if code != 0 || lagRef(second.LagReference) != tc.ref {
			t.Errorf("%v: exit %d, lag reference %d: want 0, %d", tc.args, code, lagRef(second.LagReference), tc.ref)
		}
		if lagged := second.Summary.Counts[drift.StatusLagNotExcluded] > 0; lagged != (tc.ref == 0) {
			t.Errorf("%v: counts %v", tc.args, second.Summary.Counts)
		}
	}
}

// TestCheckSeriesNotYetComputed: an association added since slurmctld's
// last pass (blank NormUsage, factor 0, as 22.05 prints it) is listed as
// not yet computed and not compared on its factor.
func TestCheckSeriesNotYetComputed(t *testing.T) {
	const after = "  idle2|tu2|1|0.082645|0|0.000000|0.000000|1.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0\n"
	text := string(readTestdata(t, "slurm-22.05/idle-classic.txt"))
	if !strings.Contains(text, after) {
		t.Fatalf("no %q", after)
	}
	added := writeFile(t, "added.txt", strings.Replace(text, after, after+"  idle2|newu|0|0.000000|0||0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0\n", 1))
	code, s := checkSeries(t, files(idle, added)...)
	second := &s.Snapshots[1]
	if code != 0 || second.Summary.NotYetComputed != 1 || second.Summary.Counts[drift.StatusOK] != 27 {
		t.Fatalf("exit %d, summary %+v", code, second.Summary)
	}
	for _, e := range second.Associations {
		if noted := strings.Contains(strings.Join(e.Notes, ";"), "not yet computed by slurmctld"); noted != (e.User == "newu") {
			t.Errorf("%s/%s: notes %q", e.Account, e.User, e.Notes)
		}
	}
	code, out, _ := runCLI(t, append([]string{"check"}, files(idle, added)...)...)
	if code != 0 || !strings.Contains(out, "not yet computed by slurmctld 1") || !strings.Contains(out, "NOT_YET_COMPUTED") {
		t.Errorf("table: exit %d\n%s", code, out)
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
