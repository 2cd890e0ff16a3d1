package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// Two consecutive decay passes of real slurmctld 22.05 in classic mode
// while jobs ran, and an idle capture (testdata/README.md).
const (
	running1 = "running-classic-1.txt"
	running2 = "running-classic-2.txt"
	idle     = "idle-classic.txt"
)

// auto replays as check does by default.
var auto = Replay{Algorithm: "auto", Dampening: 1, Tolerance: drift.DefaultTolerance.Formula}

// capture is a 22.05 capture as Series.Add takes it, taken at at (zero:
// unknown), with edit applied (from, to; nil: as captured).
func capture(t *testing.T, name string, at time.Time, edit ...string) sshare.Snapshot {
	t.Helper()
	path := filepath.Join("..", "testdata", "slurm-22.05", name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i+1 < len(edit); i += 2 {
		if !strings.Contains(text, edit[i]) {
			t.Fatalf("no %q in %s", edit[i], name)
		}
		text = strings.Replace(text, edit[i], edit[i+1], 1)
	}
	out, err := Read(strings.NewReader(text), path, "auto")
	if err != nil {
		t.Fatal(err)
	}
	return sshare.Snapshot{File: path, At: at, Table: out}
}

// seriesOut is Series's JSON for more than one snapshot.
type seriesOut struct {
	Snapshots []struct {
		Index        int  `json:"index"`
		LagReference *int `json:"lag_reference"`
		OK           bool `json:"ok"`
		drift.Report
	} `json:"snapshots"`
	OK       bool  `json:"ok"`
	Drifting []int `json:"drifting"`
}

// runSeries checks the snapshots as a series printing JSON and decodes it.
func runSeries(t *testing.T, period time.Duration, snaps ...sshare.Snapshot) (bool, *seriesOut) {
	t.Helper()
	var b bytes.Buffer
	s := NewSeries(&b, "json", auto, period)
	for _, snap := range snaps {
		if err := s.Add(snap); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var out seriesOut
	if err := json.Unmarshal(b.Bytes(), &out); err != nil || out.Snapshots == nil {
		t.Fatalf("%v: want {\"snapshots\": [...]}\n%s", err, b.String())
	}
	if ok != out.OK || ok != (len(out.Drifting) == 0) {
		t.Errorf("Finish says ok=%v, the JSON ok=%v, drifting %v", ok, out.OK, out.Drifting)
	}
	for i, snap := range out.Snapshots {
		if snap.Index != i+1 || snap.OK != snap.Report.OK() {
			t.Errorf("snapshot %d: index %d, ok %v, its report's %v", i+1, snap.Index, snap.OK, snap.Report.OK())
		}
	}
	return ok, &out
}

// lagRef is a snapshot's lag reference, 0 for none.
func lagRef(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// TestSeriesRunningClassic: two consecutive passes while jobs ran. The
// first, with nothing earlier, cannot tell the one-pass lag from drift
// (lag_not_excluded); the second has the first as its lag reference and
// replays within precision. A third snapshot with the same usage (no pass
// between) keeps the first as reference, as serve does. Nothing drifts.
func TestSeriesRunningClassic(t *testing.T) {
	ok, s := runSeries(t, 5*time.Minute, capture(t, running1, time.Time{}), capture(t, running2, time.Time{}), capture(t, running2, time.Time{}))
	if !ok || len(s.Snapshots) != 3 {
		t.Fatalf("ok %v, %d snapshots: want true, 3", ok, len(s.Snapshots))
	}
	first := &s.Snapshots[0]
	if c := first.Summary.Counts; first.LagReference != nil || c[drift.StatusDrift] != 0 || c[drift.StatusLagNotExcluded] != 18 || !strings.Contains(first.Note, "lag") {
		t.Errorf("first: lag reference %d, counts %v, note %q: want none, 18 lag_not_excluded, a note", lagRef(first.LagReference), c, first.Note)
	}
	for i := 1; i < 3; i++ {
		snap := &s.Snapshots[i]
		if lagRef(snap.LagReference) != 1 || snap.Summary.Counts[drift.StatusOK] != 26 || snap.Note != "" {
			t.Errorf("snapshot %d: lag reference %d, counts %v, note %q: want snapshot 1, 26 ok", i+1, lagRef(snap.LagReference), snap.Summary.Counts, snap.Note)
		}
	}

	var b bytes.Buffer
	table := NewSeries(&b, "table", auto, 0)
	for _, name := range []string{running1, running2} {
		if err := table.Add(capture(t, name, time.Time{})); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := table.Finish(); !ok || err != nil {
		t.Fatalf("table: ok %v, %v", ok, err)
	}
	out := b.String()
	if !strings.Contains(out, "== snapshot 2: ") || !strings.Contains(out, "series: 2 snapshots, 0 drifting") ||
		!strings.Contains(out, "LAG_NOT_EXCLUDED") || !strings.Contains(out, "snapshot 1\n") {
		t.Errorf("table:\n%s", out)
	}
}

// TestSeriesFault: a fault in the second snapshot is flagged there, the
// first stays clean: a FairShare changed by hand, and a NormShares
// normalized among siblings as Fair Tree does (PriorityFlags changed
// without a restart), which no lag moves.
func TestSeriesFault(t *testing.T) {
	for _, tc := range []struct{ name, from, to, account, user string }{
		{"fairshare", "   org|gina|1|0.196773|40077|0.122606|0.270783|0.385253|", "   org|gina|1|0.196773|40077|0.122606|0.270783|0.350000|", "org", "gina"},
		{"norm_shares", "   inorg|ivan|1|0.275482|57253|", "   inorg|ivan|1|1.000000|57253|", "inorg", "ivan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, s := runSeries(t, 5*time.Minute, capture(t, running1, time.Time{}), capture(t, running2, time.Time{}, tc.from, tc.to))
			if ok || len(s.Drifting) != 1 || s.Drifting[0] != 2 || !s.Snapshots[0].OK {
				t.Fatalf("ok %v, drifting %v: want false, [2]", ok, s.Drifting)
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

// TestSeriesLagReferenceAge: an earlier snapshot is the lag reference
// only within 3 periods; beyond, the lag is inferred from the report
// itself (and running-classic-2 alone is lag, not drift). 0: whatever
// the times.
func TestSeriesLagReferenceAge(t *testing.T) {
	t0 := time.Unix(1795319418, 0).UTC()
	for _, tc := range []struct {
		period time.Duration
		ref    int
	}{
		{5 * time.Minute, 0},
		{30 * time.Minute, 1},
		{0, 1},
	} {
		ok, s := runSeries(t, tc.period, capture(t, running1, t0), capture(t, running2, t0.Add(time.Hour)))
		second := &s.Snapshots[1]
		if !ok || lagRef(second.LagReference) != tc.ref {
			t.Errorf("%v: ok %v, lag reference %d: want true, %d", tc.period, ok, lagRef(second.LagReference), tc.ref)
		}
		if lagged := second.Summary.Counts[drift.StatusLagNotExcluded] > 0; lagged != (tc.ref == 0) {
			t.Errorf("%v: counts %v", tc.period, second.Summary.Counts)
		}
	}
}

// TestSeriesNotYetComputed: an association added since slurmctld's last
// pass (blank NormUsage, factor 0, as 22.05 prints it) is listed as not
// yet computed and not compared on its factor.
func TestSeriesNotYetComputed(t *testing.T) {
	const after = "  idle2|tu2|1|0.082645|0|0.000000|0.000000|1.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0\n"
	const added = after + "  idle2|newu|0|0.000000|0||0.000000|0.000000||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0\n"
	ok, s := runSeries(t, 5*time.Minute, capture(t, idle, time.Time{}), capture(t, idle, time.Time{}, after, added))
	second := &s.Snapshots[1]
	if !ok || second.Summary.NotYetComputed != 1 || second.Summary.Counts[drift.StatusOK] != 27 {
		t.Fatalf("ok %v, summary %+v", ok, second.Summary)
	}
	for _, e := range second.Associations {
		if noted := strings.Contains(strings.Join(e.Notes, ";"), "not yet computed by slurmctld"); noted != (e.User == "newu") {
			t.Errorf("%s/%s: notes %q", e.Account, e.User, e.Notes)
		}
	}
	var b bytes.Buffer
	table := NewSeries(&b, "table", auto, 0)
	for _, snap := range []sshare.Snapshot{capture(t, idle, time.Time{}), capture(t, idle, time.Time{}, after, added)} {
		if err := table.Add(snap); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := table.Finish(); !ok || err != nil || !strings.Contains(b.String(), "not yet computed by slurmctld 1") || !strings.Contains(b.String(), "NOT_YET_COMPUTED") {
		t.Errorf("table: ok %v, %v\n%s", ok, err, b.String())
	}
}

// TestLoneRunningClassic: one classic snapshot taken while jobs ran
// cannot tell the one-pass lag from drift: lag not excluded, no drift;
// the same snapshot with a FairShare that no lag gives (between the
// replay's and the one a pass behind) drifts.
func TestLoneRunningClassic(t *testing.T) {
	rep, err := auto.Compare(capture(t, running1, time.Time{}).Table, nil, nil, running1)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Summary.Counts; !rep.OK() || c[drift.StatusDrift] != 0 || c[drift.StatusLagNotExcluded] != 18 || !strings.Contains(rep.Note, "lag") {
		t.Errorf("ok %v, counts %v, note %q", rep.OK(), c, rep.Note)
	}
	for _, e := range rep.Associations {
		if e.Status == drift.StatusLagNotExcluded && (e.Lag == nil || len(e.Notes) == 0 || !strings.HasPrefix(e.Notes[0], "lag not excluded")) {
			t.Errorf("%s/%s: lag %v, notes %q", e.Account, e.User, e.Lag, e.Notes)
		}
	}
	var b bytes.Buffer
	if ok, err := Write(&b, rep, "table"); !ok || err != nil || !strings.Contains(b.String(), "lag_not_excluded 18") || !strings.Contains(b.String(), "lag not excluded") {
		t.Errorf("table: ok %v, %v\n%s", ok, err, b.String())
	}

	const from, to = "   inorg|ivan|1|0.275482|38718|0.174253|0.333859|0.431698|", "   inorg|ivan|1|0.275482|38718|0.174253|0.333859|0.428000|"
	rep, err = auto.Compare(capture(t, running1, time.Time{}, from, to).Table, nil, nil, running1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Summary.Counts[drift.StatusDrift] != 1 || rep.Summary.Beyond["fairshare"] != 1 {
		t.Errorf("ivan's FairShare 0.428: %+v: want ivan drifting", rep.Summary)
	}
}

// TestSeriesOneSnapshot: one snapshot prints the report Write prints,
// byte for byte; none is ErrNoSnapshot; snapshots out of time order are
// an error naming both times.
func TestSeriesOneSnapshot(t *testing.T) {
	for _, format := range []string{"table", "json"} {
		var got, want bytes.Buffer
		s := NewSeries(&got, format, auto, 0)
		if err := s.Add(capture(t, idle, time.Unix(1795319418, 0))); err != nil {
			t.Fatal(err)
		}
		ok, err := s.Finish()
		rep, rerr := auto.Compare(capture(t, idle, time.Time{}).Table, nil, nil, idle)
		if rerr != nil {
			t.Fatal(rerr)
		}
		wantOK, _ := Write(&want, rep, format)
		if ok != wantOK || err != nil || got.String() != want.String() {
			t.Errorf("%s: ok %v, %v:\n%s\nwant\n%s", format, ok, err, got.String(), want.String())
		}
	}
	if _, err := NewSeries(&bytes.Buffer{}, "json", auto, 0).Finish(); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("no snapshot: %v, want ErrNoSnapshot", err)
	}
	s := NewSeries(&bytes.Buffer{}, "json", auto, 0)
	t0 := time.Unix(1795319418, 0).UTC()
	if err := s.Add(capture(t, idle, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(capture(t, idle, t0.Add(-5*time.Minute))); err == nil || !strings.Contains(err.Error(), "expected snapshots in time order") {
		t.Errorf("back in time: %v", err)
	}
}

// TestPick: auto takes the input's algorithm; depth_oblivious says it is
// best effort.
func TestPick(t *testing.T) {
	if got := Pick("auto", fairshare.AlgorithmFairTree); got != fairshare.AlgorithmFairTree {
		t.Errorf("auto: %s", got)
	}
	if got := Pick("classic", fairshare.AlgorithmFairTree); got != fairshare.AlgorithmClassic {
		t.Errorf("classic: %s", got)
	}
	rep, err := Replay{Algorithm: "depth_oblivious", Dampening: 1, Tolerance: auto.Tolerance}.Compare(capture(t, idle, time.Time{}).Table, nil, nil, idle)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Algorithm != "depth_oblivious" || !strings.HasSuffix(rep.Note, DepthObliviousNote) {
		t.Errorf("algorithm %q note %q", rep.Algorithm, rep.Note)
	}
}

// TestSeriesJobEndBetweenPasses: under AccountingStorageEnforce=limits
// slurmctld charges a job's last interval to RawUsage at its end, and
// computes NormUsage, EffectvUsage, LevelFS and FairShare only at the next
// pass. A series judges those against the usage of the first snapshot
// after the last pass (engine.Reading.PassRaw), as serve does: a job end
// between passes is no drift; a value no usage since the pass explains
// still is. Real 22.05 Fair Tree under limits (history limits-1h,
// moment 02), a minute's period, snapshots every 20 s.
func TestSeriesJobEndBetweenPasses(t *testing.T) {
	const rec = "../recordings/history/22.05/limits-1h/02/sshare-a-l-P-m.txt"
	t0 := time.Unix(1_795_723_200, 0)
	before := capture(t, rec, t0.Add(-20*time.Second))
	for i := range before.Table.Rows {
		before.Table.Rows[i].RawUsage *= 1.0116 // a minute before the pass, at a 1 h half-life
	}
	atPass := capture(t, rec, t0)
	// chem/dave's job ends: 3000 billing-seconds to dave, chem and root
	ended := []string{"chem|dave||0|0.000000|2559|", "chem|dave||0|0.000000|5559|",
		" chem|||60|0.576923|38969|", " chem|||60|0.576923|41969|", "root||||0.000000|163807|", "root||||0.000000|166807|"}
	for _, c := range []struct {
		name  string
		later sshare.Snapshot
		ok    bool
	}{
		{"a job end since the pass", capture(t, rec, t0.Add(20*time.Second), ended...), true},
		{"a NormUsage no usage explains", capture(t, rec, t0.Add(20*time.Second), "chem|dave||0|0.000000|2559|0.015625|", "chem|dave||0|0.000000|2559|0.031250|"), false},
	} {
		ok, out := runSeries(t, time.Minute, before, atPass, c.later)
		if last := out.Snapshots[2]; last.OK != c.ok || !out.Snapshots[0].OK || !out.Snapshots[1].OK || ok != c.ok {
			t.Errorf("%s: snapshots ok %v %v %v, want true true %v; last counts %v", c.name, out.Snapshots[0].OK, out.Snapshots[1].OK, last.OK, c.ok, last.Summary.Counts)
		}
	}
}
