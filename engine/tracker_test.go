package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sim"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// TestReferences: a report's lag reference is the last earlier read whose
// usage differs (taken before slurmctld's last pass), at most 3 periods
// old; its pass reference the first read after the last pass seen, at
// most a period old and only where its usage differs. serve and check's
// series take both from Reading.Follow.
func TestReferences(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	usage := func(v float64) map[result.AssocKey]float64 { return map[result.AssocKey]float64{{Account: "a"}: v} }
	read := func(id int, sec int, v float64, pass bool) *Reading {
		at := t0.Add(time.Duration(sec) * time.Second)
		return &Reading{ID: id, At: at, Start: at, End: at.Add(time.Second), Raw: usage(v), Pass: pass}
	}
	reads := []*Reading{
		read(1, 0, 100, false),
		read(2, 30, 100, false), // same usage: no evidence of a pass
		read(3, 60, 99, true),   // a pass: 1 and 2 came before it
		read(4, 70, 99.5, false),
		read(5, 400, 99.5, false), // 340 s after 3: past 3 periods, and past one since the pass
	}
	want := []struct {
		lag     int // ID of the lag reference (0: none)
		passRaw bool
	}{{0, false}, {0, false}, {2, false}, {3, true}, {0, false}}
	var prev *Reading
	for i, r := range reads {
		r.Follow(prev)
		prev = r
		lag := 0
		if ref := r.LagReference(time.Minute); ref != nil {
			lag = ref.ID
		}
		if lag != want[i].lag {
			t.Errorf("read %d: lag reference %d, want %d", r.ID, lag, want[i].lag)
		}
		if got := r.PassRaw(time.Minute) != nil; got != want[i].passRaw {
			t.Errorf("read %d: pass reference %v, want %v", r.ID, got, want[i].passRaw)
		}
	}
	// a zero period or an unknown moment: whatever the times (check's
	// series of files without '## <unix seconds>' lines)
	if ref := reads[4].LagReference(0); ref == nil || ref.ID != 3 {
		t.Errorf("period 0: lag reference %v, want read 3", ref)
	}
	if got := reads[4].PassRaw(0); got == nil {
		t.Error("period 0: pass reference dropped")
	}
}

// TestReadAfterPass: a read that may straddle slurmctld's pass (within
// the phase's uncertainty of it) shows the side after it only when a pass
// was seen since the read before, and that read began after the pass a
// period earlier could have fallen: otherwise the pass seen may be that
// one, or none was seen, and serve judges it against the whole period.
func TestReadAfterPass(t *testing.T) {
	pass := time.Unix(1_800_000_060, 0)
	in := &build.Inputs{Database: build.Database{Passes: fairshare.Passes{Period: 60, Phase: float64(pass.Unix())},
		Phase: result.Phase{Source: result.PhaseInferred, Uncertainty: 2 * time.Second}}}
	cases := []struct {
		name       string
		prev, read time.Duration // starts, from the pass
		seen       bool          // a pass seen between the two reads
		after      bool
	}{
		{"bracket read before the window", -30 * time.Second, time.Second, true, true},
		{"steady reads, just after each pass", -60*time.Second + 2500*time.Millisecond, 1500 * time.Millisecond, true, true},
		{"no pass seen: before it", -30 * time.Second, 0, false, false},
		{"read before may precede the pass before", -59 * time.Second, time.Second, true, false},
		{"read before a period and more earlier", -90 * time.Second, time.Second, true, false},
	}
	for _, c := range cases {
		at := func(d time.Duration) *Reading {
			s := pass.Add(d)
			return &Reading{Start: s, At: s.Add(5 * time.Millisecond), End: s.Add(10 * time.Millisecond)}
		}
		prev, r := at(c.prev), at(c.read)
		r.Pass = c.seen
		r.Follow(prev)
		if _, got := in.ShownAfter([2]time.Time{r.Start, r.End}, r.Pass, r.PassGap); got != c.after {
			t.Errorf("%s: after %v, want %v", c.name, got, c.after)
		}
	}
}

// TestPassMemory: the phase one boot's reads pinned survives serve's
// restart (--storage.path), sealed (internal/sealed), as a belief: a
// tracker that recalls it judges as without it until its first bracket of
// a pass, which confirms it (known at once, to the saved uncertainty) or
// drops it (Dropped names the bracket); another boot's is not taken.
func TestPassMemory(t *testing.T) {
	boot := time.Unix(1_800_000_000, 0)
	pass := boot.Add(17 * time.Second)
	tree := fairshare.Synthetic(20, 3, 1)
	table := shares.Of(tree, tree.FairTree())
	decayed := decayedTable(table, 0.9)
	read := func(at, boot time.Time, tab *shares.Table) *Reading {
		return &Reading{Out: tab, Raw: drift.RawByKey(tab), Start: at, End: at.Add(time.Second), At: at.Add(time.Second / 2), Boot: boot}
	}
	conf := TrackerConfig{Period: time.Minute, Confirm: 1}
	m := PassMemory{Boot: boot, Pass: pass, Uncertainty: 500 * time.Millisecond, Period: time.Minute}
	e := New(&slurmconf.Config{ClusterName: "c"}, "", WithStorage(t.TempDir()))
	e.KeepPasses(m)
	for _, c := range []struct {
		name    string
		boot    time.Time
		passes  time.Time // where slurmctld's passes fall
		known   bool      // after the bracket
		u       time.Duration
		dropped bool
	}{
		{"same boot, right", boot, pass, true, 500 * time.Millisecond, false},
		{"same boot, 30 s off", boot, pass.Add(30 * time.Second), false, 0, true},
		{"another boot", boot.Add(time.Hour), pass, false, 0, false},
	} {
		t2 := NewTracker(conf)
		e.recallPasses(t2)
		at := c.passes.Add(2*time.Hour - 1500*time.Millisecond)
		t2.observe(read(at, c.boot, table), true)
		if _, _, ok := t2.pass(true, at); ok {
			t.Errorf("%s: phase known at the first read, before any bracket confirmed the saved one", c.name)
		}
		// a read just after the pass: a bracket of it 2.5 s wide
		at = at.Add(1500 * time.Millisecond)
		t2.observe(read(at, c.boot, decayed), true)
		got, u, ok := t2.pass(true, at.Add(time.Second))
		if ok != c.known || ok && (got.Sub(c.passes)%time.Minute != 0 || u != c.u) {
			t.Errorf("%s: phase %v ±%v known %v; want known %v, on %v's schedule ±%v", c.name, got, u, ok, c.known, c.passes, c.u)
		}
		if why := t2.Dropped(); (why != "") != c.dropped {
			t.Errorf("%s: dropped %q, want dropped %v", c.name, why, c.dropped)
		}
	}
}

// decayedTable is tab with every RawUsage times f: a decay pass.
func decayedTable(tab *shares.Table, f float64) *shares.Table {
	d := *tab
	d.Rows = slices.Clone(tab.Rows)
	for i := range d.Rows {
		d.Rows[i].RawUsage *= f
	}
	return &d
}

// TestPassFileSealed: a saved pass phase is used only as written: an
// edit that keeps it valid JSON, a file of the format before the header
// (JSON alone: warned by name, once, as the next save replaces it), are
// not recalled.
func TestPassFileSealed(t *testing.T) {
	var logs bytes.Buffer
	dir := t.TempDir()
	e := New(&slurmconf.Config{ClusterName: "c"}, "", WithStorage(dir), WithLogger(zerolog.New(&logs)))
	m := PassMemory{Boot: time.Unix(1_800_000_000, 0), Pass: time.Unix(1_800_000_017, 0), Uncertainty: time.Second, Period: time.Minute}
	e.KeepPasses(m)
	path := filepath.Join(dir, "c.passes")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(m)
	for _, c := range []struct {
		name, data, want string
		recalled         bool
	}{
		{"as saved", string(good), "", true},
		{"pass moved 30 s, still JSON", strings.Replace(string(good), ":17Z", ":47Z", 1), "changed since it was written", false},
		{"JSON alone", string(plain), "saved pass phase without a checksum", false},
	} {
		if err := os.WriteFile(path, []byte(c.data), 0o600); err != nil {
			t.Fatal(err)
		}
		logs.Reset()
		tr := NewTracker(TrackerConfig{Period: time.Minute})
		e.recallPasses(tr)
		if (tr.recalled != nil) != c.recalled || c.want != "" && !strings.Contains(logs.String(), c.want) {
			t.Errorf("%s: recalled %v (want %v), logs %s; want them saying %q", c.name, tr.recalled != nil, c.recalled, logs.String(), c.want)
		}
	}
}

// TestTrackerReadBudget: serve's reads of a simulated
// slurmctld (sim, its passes at its boot's schedule) under the engine's
// clock. Knowing the boot, the tracker pins the phase at the first pass,
// then reads once a period, and asks the boot once.
func TestTrackerReadBudget(t *testing.T) {
	const speed = 300
	c, err := sim.New(sim.Config{Associations: 200, Speed: speed, History: 24 * time.Hour, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	period := c.Conf().PriorityCalcPeriod
	boots := 0
	tr := NewTracker(TrackerConfig{Read: c.Report, Timeout: time.Minute, Interval: period, Period: period, Confirm: 1,
		BootTime: func(ctx context.Context) (time.Time, error) { boots++; return c.Boot(ctx) },
		Process:  func() (slurmstate.Process, error) { return slurmstate.Process{PID: 1, Start: 1}, nil }})
	tr.clock = Clock{Now: c.Now, Speed: speed}
	tr.SetConf(c.Conf())
	start := c.Now()
	var pinned time.Time
	var reads []time.Time
	ctx := context.Background()
	for c.Now().Sub(start) < 12*period {
		r := tr.Read(ctx)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		reads = append(reads, r.Start)
		if _, u, ok := tr.pass(true, r.End); ok && pinned.IsZero() && u < 2*time.Second {
			pinned = r.End
		}
		time.Sleep(tr.clock.Until(tr.Next(r)))
	}
	if pinned.IsZero() || pinned.Sub(start) > 2*period {
		t.Fatalf("phase pinned at %v, want within two periods of the start", pinned.Sub(start))
	}
	steady := 0
	for _, at := range reads {
		if at.After(pinned) {
			steady++
		}
	}
	periods := c.Now().Sub(pinned).Seconds() / period.Seconds()
	if float64(steady) > periods+1 {
		t.Errorf("%d reads in %.1f periods once pinned, want one a period", steady, periods)
	}
	if boots != 1 {
		t.Errorf("boot time asked %d times, want once", boots)
	}
	t.Logf("pinned after %v; %d reads in %.1f periods after", pinned.Sub(start), steady, periods)
}

// TestTrackerAsksBoot: slurmctld's boot is asked at the first
// read and when its process changes (a restart that keeps every value),
// not at every read; without a way to see the process, at every read.
func TestTrackerAsksBoot(t *testing.T) {
	tree := fairshare.Synthetic(20, 3, 1)
	table := shares.Of(tree, tree.FairTree())
	boots := 0
	proc := slurmstate.Process{PID: 10, Start: 100}
	c := TrackerConfig{Read: func(context.Context) (*shares.Table, error) { return table, nil }, Timeout: time.Second, Period: time.Minute,
		BootTime: func(context.Context) (time.Time, error) { boots++; return time.Unix(1_800_000_000, 0), nil },
		Process:  func() (slurmstate.Process, error) { return proc, nil }}
	tr := NewTracker(c)
	read := func(n int) {
		for range n {
			if r := tr.Read(context.Background()); r.Err != nil || r.Boot.IsZero() {
				t.Fatalf("read: %v, boot %v", r.Err, r.Boot)
			}
		}
	}
	read(3)
	if boots != 1 {
		t.Errorf("three reads of one slurmctld: boot asked %d times, want once", boots)
	}
	proc.PID = 11
	read(2)
	if boots != 2 {
		t.Errorf("after a restart: boot asked %d times in all, want twice", boots)
	}
	c.Process = nil
	tr, boots = NewTracker(c), 0
	read(3)
	if boots != 3 {
		t.Errorf("no process to watch: boot asked %d times in three reads, want every read", boots)
	}
}

// TestReadAcrossPassLosses: check's reads across a pass count a user's
// RawUsage zeroed between two of them (sacctmgr ... set RawUsage=0) as a
// loss, for check's diagnosis; a single read counts none. The tables are
// the synthetic tree's, slurmctld's sums as shares.Of prints them.
func TestReadAcrossPassLosses(t *testing.T) {
	tree := fairshare.Synthetic(20, 3, 1)
	full := shares.Of(tree, tree.FairTree())
	assocs := make([]fairshare.Association, tree.Len())
	user := -1
	for i := range assocs {
		assocs[i] = tree.Association(i)
		if user < 0 && assocs[i].IsUser() && assocs[i].RawUsage > 100 {
			user = i
		}
	}
	for i := user; i >= 0; i = assocs[i].Parent {
		assocs[i].RawUsage -= tree.Association(user).RawUsage
	}
	reset, err := fairshare.NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	zeroed := shares.Of(reset, reset.FairTree())
	start, t0 := time.Now(), time.Unix(1_800_000_000, 0)
	clock := Clock{Now: func() time.Time { return t0.Add(time.Since(start) * 1000) }, Speed: 1000}
	for _, tc := range []struct {
		name  string
		wait  time.Duration
		reads []*shares.Table
		lost  bool
	}{{"one read", 0, []*shares.Table{full}, false}, {"reset between reads", 70 * time.Second, []*shares.Table{full, zeroed}, true}} {
		n := 0
		tr := NewTracker(TrackerConfig{Read: func(context.Context) (*shares.Table, error) {
			out := tc.reads[min(n, len(tc.reads)-1)]
			n++
			return out, nil
		}, Timeout: time.Second, Period: time.Minute})
		tr.clock = clock
		tr.SetConf(&slurmconf.Config{PriorityCalcPeriod: time.Minute, PriorityDecayHalfLife: 7 * 24 * time.Hour})
		r, err := tr.ReadAcrossPass(context.Background(), tc.wait)
		if err != nil {
			t.Fatal(err)
		}
		a := tree.Association(user)
		got := len(r.Losses) == 1 && r.Losses[0].Account == a.Account && r.Losses[0].User == a.User
		if got != tc.lost || !tc.lost && r.Losses != nil {
			t.Errorf("%s (%d reads): losses %+v, want %s/%s lost: %v", tc.name, n, r.Losses, a.Account, a.User, tc.lost)
		}
	}
}
