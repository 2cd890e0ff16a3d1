package e2e

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// TestHistoryFidelity builds the history every production cluster has
// (jobs; idle; RawUsage=0 on one user; scontrol reconfigure to other
// PriorityFlags; a slurmctld restart with a job running; an association
// added while jobs run; a user removed after it had usage; a restart back
// to Fair Tree) on real Slurm (22.05; $SLURMDBD_EXPORTER_RELEASES names
// others, make record runs each), and after each event compares the
// database rebuild (check in database mode, the pass phase from the state
// file) with slurmctld's RawUsage, association by association, for those
// holding at least 1% of root's usage (docs/usage.md has the table).
//
// What it pins:
//   - RawUsage=0 is not in the database (sacctmgr sends it to slurmctld
//     only): the user's ancestors stay off by exactly the user's usage
//     before the reset, decaying with it; every other association matches.
//   - a removed user's usage stays with its account in slurmctld, and its
//     rolled-up rows are marked deleted in the database (read anyway).
//   - with AccountingStorageEnforce=limits, restarts, reconfigures and
//     added associations leave every association within 0.5% at a 1-hour
//     half-life (the stress setting), within 0.1% at 7 days (a site's).
//   - without limits (at a 7-day half-life, a site's), every association
//     is within 0.1% until slurmctld restarts. A finished job's last
//     partial period is never charged, and where it ended against the
//     passes decides how much: a restart starts the passes at a new phase,
//     so the jobs that ended before it were cut at a phase the state file
//     no longer holds. Their error stays inside check's bound (the tails'
//     TailWindow is the whole period for jobs older than slurmctld's
//     start), not a false alarm.
//   - a restart can lose slurmctld's state: it saves it on the way out only
//     if no lock is held at that moment (slurmharness.savedState). The
//     harness reads slurmctld's log at each restart; after a lost save,
//     what slurmctld lost beyond check's bound must be flagged.
//
// The cluster without limits runs only with SLURMDBD_EXPORTER_HISTORY=all.
// Without limits, in one of four runs (the CI run of
// 2026-11-24, the machine loaded) slurmctld charged a 128-CPU job one
// pass less than the rebuild before any event (check flagged it): a pass
// that waited for the job lock while the job ended is the cause
// slurmctld's source gives (drift.PassError.TailLost, docs/usage.md); the
// database cannot tell which jobs, so only the bound holds there.
func TestHistoryFidelity(t *testing.T) {
	t.Parallel()
	variants := []historyVariant{
		{"limits-1h", "associations,limits", "0-01:00:00", 0.005, false},
		// the shortest half-life in use (issue 30 saw an account 4.7% off
		// at it), where a pass's moment weighs most: 1% until the first
		// restart; after it usage charged before slurmctld's last start
		// weighs by the passes of the boot before, whose phase nobody
		// keeps (up to 1.3% off on 22.05.8, 2026-11-27), and only check's
		// bound holds (drift.PassError.BootUsage)
		{"limits-10m", "associations,limits", "0-00:10:00", 0.01, true},
		// a site's half-life: what a pass's moment moves shrinks with
		// the decay over one period
		{"limits-7d", "associations,limits", "7-00:00:00", 0.001, false},
	}
	if os.Getenv("SLURMDBD_EXPORTER_HISTORY") == "all" {
		// and without limits: the tails' phase shows
		variants = append(variants, historyVariant{"nolimits-7d", "associations", "7-00:00:00", 0.001, true})
	}
	for _, release := range liveReleases() {
		for _, v := range variants {
			t.Run(release+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				historyFidelity(t, release, v)
			})
		}
	}
}

// TestHistoryReplay judges every recorded history (make record: each
// release's TestHistoryFidelity) capture by capture, as the live run
// judged it, through the built binary on the captured database.
func TestHistoryReplay(t *testing.T) {
	t.Parallel()
	r := newReplayer(t)
	// per release: each user's bound (allowed RawUsage drift) as a share
	// of its usage, and the losses check did not flag
	shares := map[string][]float64{}
	var losses, losses20 int
	var missed, missed20 []string
	// $SLURMDBD_EXPORTER_LOSS measures a smaller loss (docs/serve.md)
	frac := 0.1
	if v := os.Getenv("SLURMDBD_EXPORTER_LOSS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			t.Fatalf("SLURMDBD_EXPORTER_LOSS=%q: expected a fraction above 0, at most 1", v)
		}
		frac = f
	}
	for _, dir := range recorded(t, "history") {
		rel, _ := filepath.Rel(recordings, dir)
		t.Run(rel, func(t *testing.T) {
			var ev historyEvent
			readEvent(t, dir, &ev)
			m, err := slurmharness.ReadMoment(dir)
			if err != nil {
				t.Fatal(err)
			}
			l := r.load(t, dir)
			code, rep, stderr := l.check(t, "")
			ev.judge(t, m.Middle(), code, rep, stderr)
			// sshare --json, read right after the text (24.11 on),
			// judged alike
			if js := filepath.Join(dir, slurmharness.CaptureSshareJSON); fileExists(js) {
				code, rep, stderr := l.check(t, js)
				ev.judge(t, m.Middle(), code, rep, stderr)
			}
			if ev.Lost {
				return
			}
			release := strings.Split(rel, string(filepath.Separator))[1]
			shares[release] = append(shares[release], boundShares(rep)...)
			partsAddUp(t, rep)
			// issue 30: a 10% loss with the state file and the boot
			// known, a 20% loss without the state file
			n, miss := lossesFlagged(t, l, rep, frac)
			losses, missed = losses+n, append(missed, miss...)
			n, miss = lossesFlagged(t, l, rep, 0.2, "--slurm.state-dir", t.TempDir())
			losses20, missed20 = losses20+n, append(missed20, miss...)
		})
	}
	for _, release := range slices.Sorted(maps.Keys(shares)) {
		s := shares[release]
		slices.Sort(s)
		t.Logf("%s: bound as a share of usage (users at 5%% of root or more): median %.2f%%, p90 %.2f%%, largest %.2f%% (%d users)",
			release, 100*s[len(s)/2], 100*s[len(s)*9/10], 100*s[len(s)-1], len(s))
	}
	t.Logf("%g%% losses flagged: %d of %d (state file, boot known); 20%% without the state file: %d of %d",
		100*frac, losses-len(missed), losses, losses20-len(missed20), losses20)
	// judged (issue 30): every loss flagged. The reads within 2 s after a
	// pass, which show either side of it, are judged against the side
	// the report is on (check.Database.CompareSides); before that, a
	// period of running jobs' charge hid 13 of the 120 10% losses.
	judge := t.Errorf
	if frac != 0.1 {
		judge = t.Logf // $SLURMDBD_EXPORTER_LOSS measures how small a loss is caught
	}
	for _, m := range missed {
		judge("%g%% loss not flagged with the state file and the boot known: %s", 100*frac, m)
	}
	for _, m := range missed20 {
		t.Errorf("20%% loss not flagged without the state file: %s", m)
	}
}

// partsAddUp: every entry's bound_parts (check's JSON, issue 30) add up
// to its RawUsage bound.
func partsAddUp(t *testing.T, rep drift.Report) {
	t.Helper()
	n := 0
	for _, e := range rep.Associations {
		if e.Bound == nil || e.BoundParts == nil {
			continue
		}
		n++
		if b := float64(e.Bound.RawUsage); math.Abs(e.BoundParts.Total()-b) > 1e-9*max(b, 1) {
			t.Errorf("%s/%s: bound_parts %+v add up to %v, bound %v", e.Account, e.User, *e.BoundParts, e.BoundParts.Total(), b)
		}
	}
	if n == 0 {
		t.Error("no entry with bound_parts")
	}
}

// boundShares are, for every user holding at least 5% of root's
// RawUsage in rep, its allowed RawUsage drift as a share of its usage.
func boundShares(rep drift.Report) []float64 {
	root := reportedRoot(rep)
	var out []float64
	for _, e := range rep.Associations {
		if e.User == "" || e.Reported == nil || e.Allowed == nil || float64(e.Reported.RawUsage) < 0.05*root {
			continue
		}
		out = append(out, float64(e.Allowed.RawUsage)/float64(e.Reported.RawUsage))
	}
	return out
}

// lossesFlagged gives the reported side of a loaded capture whose check
// gave rep a loss of frac of each user's RawUsage in turn (its account
// and root the same amount less), for every user holding at least 5% of
// root's, and checks it again (args added); missed names the losses
// check did not flag (status drift, exit 1) with the bound that hid them.
func lossesFlagged(t *testing.T, l loaded, rep drift.Report, frac float64, args ...string) (losses int, missed []string) {
	t.Helper()
	root := reportedRoot(rep)
	text, err := os.ReadFile(filepath.Join(l.dir, slurmharness.CaptureSshare))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Associations {
		if e.User == "" || e.Reported == nil || float64(e.Reported.RawUsage) < 0.05*root {
			continue
		}
		lost, used, err := withLoss(string(text), e.Account, e.User, frac)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "sshare.txt")
		if err := os.WriteFile(file, []byte(lost), 0o644); err != nil {
			t.Fatal(err)
		}
		code, got, _ := l.check(t, file, args...)
		for _, g := range got.Associations {
			if g.Account != e.Account || g.User != e.User || g.Partition != e.Partition {
				continue
			}
			var allowed float64
			if g.Allowed != nil {
				allowed = float64(g.Allowed.RawUsage)
			}
			losses++
			if g.Status != drift.StatusDrift || code != 1 {
				missed = append(missed, fmt.Sprintf("%s %s/%s (allowed %.1f%% of its usage)", l.dir, e.Account, e.User, 100*allowed/used))
			}
		}
	}
	return losses, missed
}

// liveReleases are the Slurm releases a live history or rollup runs on:
// $SLURMDBD_EXPORTER_RELEASES (make record: all three), else the host's.
func liveReleases() []string {
	if r := os.Getenv("SLURMDBD_EXPORTER_RELEASES"); r != "" {
		return strings.Fields(r)
	}
	return []string{"22.05"}
}

type historyVariant struct {
	name, enforce, halfLife string
	target                  float64 // relative, outside the reset's chain
	boundOnly               bool    // after a restart, only check's bound holds
}

// historyEvent is what judging one moment of a history needs beyond
// check's report; a recording keeps it beside the capture.
type historyEvent struct {
	Name      string  `json:"name"`
	Target    float64 `json:"target"`
	BoundOnly bool    `json:"bound_only"`
	Restarted bool    `json:"restarted"`
	// Lost: a restart found a slurmctld lock held as it shut down, so
	// slurmctld saved nothing and came back with its last checkpoint's
	// usage (slurmharness.savedState): a real loss check must flag
	Lost bool `json:"lost"`
	// Reset is bob's usage when slurmctld reset it (RawUsage=0), as the
	// database rebuilt it, at ResetAt (unix seconds; 0: no reset yet):
	// what his ancestors miss, decaying with HalfLife (seconds)
	Reset    float64 `json:"reset,omitempty"`
	ResetAt  float64 `json:"reset_at,omitempty"`
	HalfLife float64 `json:"half_life"`
}

// judge fails t where check's report of the moment at does not hold what
// the history pins (TestHistoryFidelity).
func (ev historyEvent) judge(t *testing.T, at time.Time, code int, rep drift.Report, stderr string) {
	t.Helper()
	var reset func(float64) float64
	if ev.ResetAt > 0 {
		d := 1 - 0.693/ev.HalfLife
		reset = func(now float64) float64 { return ev.Reset * math.Pow(d, now-ev.ResetAt) }
	}
	worst, which, over, all := fidelityOf(rep, reset, float64(at.UnixNano())/1e9, ev.Target)
	t.Logf("%s: exit %d %v; worst %.3f%% (%s); %s %s", ev.Name, code, rep.Summary.Counts, 100*worst, which, strings.Join(all, ", "), strings.TrimSpace(stderr))
	switch {
	case ev.BoundOnly && ev.Restarted:
		// raw usage only: the reset moves the factors of bob's
		// siblings too
		for _, e := range rep.Associations {
			if e.Drift != nil && e.Allowed != nil && !onChain(e, "phys", "bob") && math.Abs(float64(e.Drift.RawUsage)) > float64(e.Allowed.RawUsage) {
				t.Errorf("%s: %s/%s RawUsage %v off, allowed %v: what slurmctld charged before the restart (tails, passes of the boot before) is outside check's bound", ev.Name, e.Account, e.User, e.Drift.RawUsage, e.Allowed.RawUsage)
			}
		}
	case ev.Lost:
		// slurmctld is what is wrong now: what it lost beyond the
		// error check's unknowns explain must be flagged, the rest
		// can only be logged
		for _, e := range over {
			off, allowed := math.Abs(float64(e.Drift.RawUsage)), math.Inf(1)
			if e.Allowed != nil {
				allowed = float64(e.Allowed.RawUsage)
			}
			t.Logf("%s: %s/%s lost by slurmctld: RawUsage off by %v, allowed %v, status %s", ev.Name, e.Account, e.User, off, allowed, e.Status)
			if off > allowed && (e.Status != drift.StatusDrift || code != 1) {
				t.Errorf("%s: %s/%s RawUsage off by %v (allowed %v) after slurmctld lost its state, and check did not flag it (status %s, exit %d)", ev.Name, e.Account, e.User, off, allowed, e.Status, code)
			}
		}
	case worst > ev.Target:
		t.Errorf("%s: RawUsage rebuilt %.3f%% off slurmctld's on %s (target %.1f%%)", ev.Name, 100*worst, which, 100*ev.Target)
	}
	if ev.ResetAt > 0 {
		resetNoted(t, ev.Name, rep)
	}
}

// resetNoted: check, judging one saved report of slurmctld after
// sacctmgr's RawUsage=0 on bob, says how much usage bob's slurmctld
// holds less and blames no reset: one file shows no fall, and the gap
// alone does not tell a reset from a loss (drift.diagnose).
func resetNoted(t *testing.T, name string, rep drift.Report) {
	t.Helper()
	for _, e := range rep.Associations {
		if e.Account != "phys" || e.User != "bob" || e.Status != drift.StatusDrift {
			continue
		}
		notes := strings.Join(e.Notes, "; ")
		if !strings.Contains(notes, "billing-seconds less than the database records") || strings.Contains(notes, "usage reset") {
			t.Errorf("%s: phys/bob notes %q: want the gap, no reset blamed", name, notes)
		}
		return
	}
	t.Errorf("%s: phys/bob not flagged after RawUsage=0", name)
}

func historyFidelity(t *testing.T, release string, v historyVariant) {
	// slurmdbd's hourly rollup 9 minutes in, between the reconfigure's
	// jobs and the first restart, which sends their ends again: the
	// captures after it read rolled-up hours, then a rewound one
	hourAt := time.Now().Add(9 * time.Minute).Truncate(time.Minute)
	c := slurmharness.Start(t, slurmharness.Config{Release: release, Enforce: v.enforce, HalfLife: v.halfLife, CPUs: 1024, Extra: []string{"DebugFlags=Priority"}, HourAt: hourAt})
	for _, u := range []string{"alice", "bob", "carol", "dave", "erin", "frank"} {
		c.EnsureUnixUser(u)
	}
	c.LoadTree([][]string{
		{"add", "account", "phys", "parent=root", "fairshare=40"},
		{"add", "account", "chem", "parent=root", "fairshare=60"},
		{"add", "account", "bio", "parent=root", "fairshare=parent"},
		{"add", "user", "alice", "account=phys", "fairshare=1"},
		{"add", "user", "bob", "account=phys", "fairshare=2"},
		{"add", "user", "carol", "account=chem", "fairshare=1"},
		{"add", "user", "dave", "account=chem", "fairshare=0"},
		{"add", "user", "erin", "account=bio", "fairshare=3"},
	})
	dsn := readerDSNFile(t, c)
	db := []string{"--dsn-file", dsn, "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir(), "--slurmctld.pid-file", c.PidFile()}
	ev := historyEvent{Target: v.target, BoundOnly: v.boundOnly, HalfLife: halfLifeSeconds(t, v.halfLife)}
	run := filepath.Join(recordings, "history", release, v.name)
	if recording() {
		startRun(t, run)
	}
	restart := func(flags string) {
		t.Helper()
		ev.Restarted = true
		if !c.RestartCtld(flags) {
			ev.Lost = true
			t.Logf("slurmctld saved no state on the way out: from here on, what it lost must be flagged")
		}
	}
	captures, replay := 0, replayerOn(c.DB)
	capture := func(event string) {
		t.Helper()
		ev.Name = event
		code, rep, stderr := checkJSON(t, c.Env(), db...)
		ran, _ := c.HourlyRollup()
		t.Logf("%s: last_ran %s, hourly rollup at %s", event, ran.Format(time.TimeOnly), hourAt.Format(time.TimeOnly))
		ev.judge(t, time.Now(), code, rep, stderr)
		if !recording() {
			return
		}
		captures++
		dir := filepath.Join(run, fmt.Sprintf("%02d", captures))
		m := recordEvent(t, c, dir, ev)
		// the replay make test will run, judged as the live run was
		code, replayed, stderr := replay.check(t, dir)
		ev.judge(t, m.Middle(), code, replayed, stderr)
		worst, which := computedApart(rep, replayed)
		t.Logf("%s: recorded in %s; the replay computes within %.4f%% of root's usage of the live check (%s)", event, dir, 100*worst, which)
	}
	idle := func() {
		t.Helper()
		c.WaitGone(15 * time.Minute)
		c.WaitDecayPass()
	}

	// jobs of every shape: wide, narrow, long, short (ending inside one
	// pass), a 0-share user and one under a FairShare=parent account
	for _, j := range []struct {
		user, acct string
		cpus, secs int
	}{
		{"alice", "phys", 512, 200}, {"bob", "phys", 64, 290}, {"carol", "chem", 256, 150}, {"dave", "chem", 16, 170},
		{"erin", "bio", 128, 230}, {"bob", "phys", 32, 20}, {"carol", "chem", 8, 35}, {"bob", "phys", 4, 50},
	} {
		c.Submit(j.user, j.acct, "", j.cpus, j.secs)
	}
	idle()
	capture("jobs, then idle")

	_, before, _ := checkJSON(t, c.Env(), db...)
	ev.Reset, ev.ResetAt = usageOf(before, "phys", "bob"), float64(time.Now().UnixNano())/1e9
	c.Sacctmgr("modify", "user", "where", "name=bob", "cluster="+c.Name, "account=phys", "set", "RawUsage=0")
	c.WaitDecayPass()
	capture("RawUsage=0 on bob")

	c.Submit("alice", "phys", "", 128, 130)
	c.Submit("carol", "chem", "", 64, 100)
	c.SetPriorityFlags("NO_FAIR_TREE")
	c.MustRun("scontrol", "reconfigure")
	idle()
	capture("scontrol reconfigure to NO_FAIR_TREE, jobs")

	c.Submit("erin", "bio", "", 256, 150)
	time.Sleep(40 * time.Second)
	restart("NO_FAIR_TREE")
	idle()
	capture("slurmctld restart, a job running")

	c.Submit("alice", "phys", "", 256, 180)
	time.Sleep(30 * time.Second)
	c.LoadTree([][]string{{"add", "user", "frank", "account=chem", "fairshare=2"}})
	c.Submit("frank", "chem", "", 128, 100)
	idle()
	capture("association added while jobs run")

	c.Sacctmgr("remove", "user", "where", "name=erin", "cluster="+c.Name, "account=bio")
	c.WaitDecayPass()
	capture("user with usage removed")

	restart("")
	idle()
	capture("restart with Fair Tree")
}

// fidelityOf is the largest relative RawUsage difference between the
// database rebuild and slurmctld over the associations holding ≥ 1% of
// root's usage at at, bob's ancestors counted without his reset (reset(at):
// what they miss; nil: no reset yet), and those of them off by more than
// target.
func fidelityOf(rep drift.Report, reset func(at float64) float64, at, target float64) (worst float64, which string, over []drift.Entry, all []string) {
	root := reportedRoot(rep)
	for _, e := range rep.Associations {
		if e.Reported == nil || e.Computed == nil {
			continue
		}
		r, d := float64(e.Reported.RawUsage), float64(e.Computed.RawUsage)-float64(e.Reported.RawUsage)
		if r <= 0 || r < 0.01*root {
			continue
		}
		if reset != nil && onChain(e, "phys", "bob") {
			d -= reset(at)
		}
		rel := math.Abs(d) / r
		name := e.Account + "/" + e.User
		all = append(all, fmt.Sprintf("%s %.0f %+.0f (%.3f%%)", name, r, d, 100*rel))
		if rel > worst {
			worst, which = rel, name
		}
		if rel > target {
			over = append(over, e)
		}
	}
	return worst, which, over, all
}

// reportedRoot is root's RawUsage as Slurm reported it (0: not reported).
func reportedRoot(rep drift.Report) float64 {
	for _, e := range rep.Associations {
		if e.Depth == 0 && e.Reported != nil {
			return float64(e.Reported.RawUsage)
		}
	}
	return 0
}

// onChain: e is the association account/user or one of its ancestors (in
// this test's tree: the account, root).
func onChain(e drift.Entry, account, user string) bool {
	return e.Depth == 0 || e.Account == account && (e.User == "" || e.User == user)
}

func usageOf(rep drift.Report, account, user string) float64 {
	for _, e := range rep.Associations {
		if e.Account == account && e.User == user && e.Computed != nil {
			return float64(e.Computed.RawUsage)
		}
	}
	return 0
}

func halfLifeSeconds(t *testing.T, hl string) float64 {
	t.Helper()
	var d, h, m, s int
	if _, err := fmt.Sscanf(hl, "%d-%d:%d:%d", &d, &h, &m, &s); err != nil {
		t.Fatalf("half-life %q: %v", hl, err)
	}
	return float64(((d*24+h)*60+m)*60 + s)
}

// TestHistoryJobEndReplay: under AccountingStorageEnforce=limits
// slurmctld charges a job's end to RawUsage at once and computes the other
// columns at its next pass. check in database mode judges them against
// the usage they were computed from, the database just after the last
// pass (build.Inputs.SincePass): a report read 30 s after real 22.05's
// pass (Fair Tree, history limits-1h 01) showing alice's job end (20,000
// billing-seconds to alice, phys and root) has no formula drift; the
// database does not hold that job, so usage drift shows it.
func TestHistoryJobEndReplay(t *testing.T) {
	dir := filepath.Join(recordings, "history", "22.05", "limits-1h", "01")
	l := newReplayer(t).load(t, dir)
	b, err := os.ReadFile(l.in(slurmharness.CaptureSshare))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, e := range [][2]string{{"phys|alice||1|0.333333|98076|", "phys|alice||1|0.333333|118076|"},
		{" phys|||40|0.384615|116763|", " phys|||40|0.384615|136763|"}, {"root||||0.000000|184398|", "root||||0.000000|204398|"}} {
		if !strings.Contains(text, e[0]) {
			t.Fatalf("no %q in the capture", e[0])
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	edited := filepath.Join(t.TempDir(), "sshare.txt")
	if err := os.WriteFile(edited, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	later := fmt.Sprintf("%.6f/%.6f", l.moment.Read[0]+30, l.moment.Read[1]+30)
	_, rep, stderr := checkJSON(t, l.env(), append(append(l.inputs(), l.boot()...), "--sshare-file", edited, "--at", later)...)
	if rep.Formula == nil {
		t.Fatalf("no formula report: %s", stderr)
	}
	if n := rep.Formula.Summary.Counts[drift.StatusDrift]; n != 0 {
		for _, e := range rep.Formula.Associations {
			if e.Status == drift.StatusDrift {
				t.Errorf("%s/%s: formula drift %v (bound %v)", e.Account, e.User, e.Drift, e.Bound)
			}
		}
	}
	if n := rep.Summary.Counts[drift.StatusDrift]; n == 0 {
		t.Error("the job end the database does not hold: no usage drift")
	}
}
