package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

var update = flag.Bool("update", false, "rewrite testdata/slurm-22.05 from the real-Slurm run (TestRealSlurmReplay)")

// goldenDir holds sshare output captured from real Slurm 22.05 by
// TestRealSlurmReplay (make golden).
const goldenDir = "../testdata/slurm-22.05"

// goldenTree is built with sacctmgr: five levels (root, phys, theory, qcd,
// carol), FairShare=parent on an account (grp) and a user (bob), a user
// with 0 shares (zed), users beside sub-accounts (frank in phys, alice in
// theory), two idle accounts tied at zero usage where one holds a 0-share
// user (idle1, idle2), a user with associations in two partitions (erin),
// and a user (rita) removed after her job ran.
var goldenTree = [][]string{
	{"add", "account", "phys", "parent=root", "fairshare=40"},
	{"add", "account", "chem", "parent=root", "fairshare=60"},
	{"add", "account", "idle1", "parent=root", "fairshare=10"},
	{"add", "account", "idle2", "parent=root", "fairshare=10"},
	{"add", "account", "theory", "parent=phys", "fairshare=30"},
	{"add", "account", "exp", "parent=phys", "fairshare=10"},
	{"add", "account", "qcd", "parent=theory", "fairshare=2"},
	{"add", "account", "org", "parent=chem", "fairshare=25"},
	{"add", "account", "grp", "parent=chem", "fairshare=parent"},
	{"add", "account", "inorg", "parent=chem", "fairshare=35"},
	{"add", "user", "alice", "account=theory", "fairshare=1"},
	{"add", "user", "bob", "account=theory", "fairshare=parent"},
	{"add", "user", "carol", "account=qcd", "fairshare=3"},
	{"add", "user", "frank", "account=phys", "fairshare=5"},
	{"add", "user", "dave", "account=exp", "fairshare=1"},
	{"add", "user", "erin", "account=exp", "partition=p1", "fairshare=1"},
	{"add", "user", "erin", "account=exp", "partition=p2", "fairshare=2"},
	{"add", "user", "rita", "account=exp", "fairshare=1"},
	{"add", "user", "gina", "account=org", "fairshare=1"},
	{"add", "user", "zed", "account=org", "fairshare=0"},
	{"add", "user", "hank", "account=grp", "fairshare=3"},
	{"add", "user", "ivan", "account=inorg", "fairshare=1"},
	{"add", "user", "tu1", "account=idle1", "fairshare=1"},
	{"add", "user", "tz0", "account=idle1", "fairshare=0"},
	{"add", "user", "tu2", "account=idle2", "fairshare=1"},
}

type goldenJob struct {
	user, account, partition string
	cpus, seconds            int
}

// Sizes differ so every association's usage differs; 2048 CPUs make usage
// large enough that RawUsage's truncation to an integer stays small.
var goldenJobs = []goldenJob{
	{"alice", "theory", "", 256, 240}, {"bob", "theory", "", 64, 240}, {"carol", "qcd", "", 192, 240},
	{"frank", "phys", "", 128, 240}, {"dave", "exp", "", 96, 240}, {"erin", "exp", "p1", 160, 240},
	{"erin", "exp", "p2", 48, 240}, {"gina", "org", "", 224, 240},
	{"zed", "org", "", 32, 240}, {"hank", "grp", "", 288, 240}, {"ivan", "inorg", "", 320, 240},
	{"rita", "exp", "", 80, 60},
}

// TestRealSlurmReplay runs real Slurm 22.05 with jobs under the golden tree,
// captures sshare in both PriorityFlags settings while jobs run and when
// idle, and replays every capture with the check command: idle captures
// must match to print precision, Fair Tree ones always, and classic ones
// while jobs run once the one-pass lag (fairshare.ClassicLagged) is
// modelled.
func TestRealSlurmReplay(t *testing.T) {
	c := slurmharness.Start(t, slurmharness.Config{CPUs: 2048})
	// Unix users first: slurmctld resolves a user association's uid when
	// the association arrives.
	for _, u := range []string{"alice", "bob", "carol", "frank", "dave", "erin", "rita", "gina", "zed", "hank", "ivan", "tu1", "tz0", "tu2"} {
		c.EnsureUnixUser(u)
	}
	c.LoadTree(goldenTree)
	var ids []string
	var ritaJob string
	for _, j := range goldenJobs {
		id := c.Submit(j.user, j.account, j.partition, j.cpus, j.seconds)
		ids = append(ids, id)
		if j.user == "rita" {
			ritaJob = id
		}
	}
	c.WaitRunning(3*time.Minute, ids...)
	captures := map[string]string{}
	c.WaitDecayPass()
	captures["running-fairtree.txt"] = c.Sshare("-a", "-l", "-P")
	// The pass just written is the phase database mode will use.
	if ran, _, err := slurmstate.LastDecayRan(c.StateDir()); err != nil || time.Since(ran) > 2*time.Minute || time.Since(ran) < 0 {
		t.Errorf("priority_last_decay_ran: last pass %v, %v: expected within the last PriorityCalcPeriod", ran, err)
	}
	// Database mode while jobs run (no rollup yet: the job table path),
	// as a SELECT-only user, with sshare run by check itself
	code, rep, stderr := checkJSON(t, c.Env(), "--dsn-file", readerDSNFile(t, c), "--slurm-conf", c.Conf)
	judgeDatabase(t, code, rep, stderr)
	if recording() {
		run := filepath.Join(recordings, "golden", "22.05")
		startRun(t, run)
		dir := filepath.Join(run, "01")
		recordEvent(t, c, dir, struct{}{})
		code, rep, stderr := replayerOn(c.DB).check(t, dir)
		judgeDatabase(t, code, rep, stderr)
	}

	// rita's usage stays with exp after her association is removed.
	c.WaitGone(3*time.Minute, ritaJob)
	c.Sacctmgr("delete", "user", "name=rita", "account=exp", "cluster="+c.Name)

	c.RestartCtld("NO_FAIR_TREE")
	c.WaitDecayPass()
	captures["running-classic-1.txt"] = c.Sshare("-a", "-l", "-P")
	c.WaitDecayPass()
	captures["running-classic-2.txt"] = c.Sshare("-a", "-l", "-P")
	if st := c.JobStates(); len(st) < len(ids)-1 {
		t.Fatalf("jobs ended before the second classic capture (%d left): lengthen them", len(st))
	}

	c.WaitGone(5 * time.Minute)
	c.WaitDecayPass()
	captureIdle(c, captures, "classic")
	c.RestartCtld("")
	c.WaitDecayPass()
	captureIdle(c, captures, "fairtree")
	// slurmctld keeps siblings in the order it loads associations: by lft
	// up to 23.02. Fair Tree walks tied accounts in that order.
	lft, err := c.SQL("SELECT lft, acct, user, `partition` FROM slurm_acct_db.`" + c.Name + "_assoc_table` WHERE deleted = 0 ORDER BY lft")
	if err != nil {
		t.Fatal(err)
	}
	captures["assoc-lft.tsv"] = lft
	captures["slurm_acct_db.sql.gz"] = string(c.Dump())

	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range captures {
			if err := os.WriteFile(filepath.Join(goldenDir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, text := range captures {
		if strings.HasSuffix(name, ".txt") {
			t.Logf("%s:\n%s", name, text)
		}
	}
	checkGoldenCaptures(t, func(name string) []byte { return []byte(captures[name]) })
}

func captureIdle(c *slurmharness.Cluster, captures map[string]string, alg string) {
	captures["idle-"+alg+".txt"] = c.Sshare("-a", "-l", "-P")
	captures["idle-"+alg+"-m.txt"] = c.Sshare("-a", "-l", "-P", "-m")
	captures["idle-"+alg+"-short.txt"] = c.Sshare("-a", "-P")
	captures["idle-"+alg+"-n.txt"] = c.Sshare("-a", "-l", "-P", "-n")
}

// TestGoldenReplay replays the committed real-Slurm 22.05 captures.
func TestGoldenReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.t[xs][tv]"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in %s (%v): run make golden", goldenDir, err)
	}
	captures := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		captures[filepath.Base(f)] = b
	}
	checkGoldenCaptures(t, func(name string) []byte { return captures[name] })
}

// checkGoldenCaptures holds what real Slurm 22.05 must agree with.
func checkGoldenCaptures(t *testing.T, read func(string) []byte) {
	for _, tc := range []struct {
		file string
		args []string
	}{
		{"idle-fairtree.txt", nil},
		{"idle-fairtree-m.txt", nil},
		{"idle-fairtree-short.txt", []string{"--algorithm", "fair_tree"}},
		{"idle-fairtree-n.txt", []string{"--algorithm", "fair_tree"}},
		{"idle-classic.txt", nil},
		{"idle-classic-m.txt", nil},
		{"idle-classic-short.txt", []string{"--algorithm", "classic"}},
		{"idle-classic-n.txt", []string{"--algorithm", "classic"}},
		// Fair Tree computes everything in one pass: consistent while jobs run.
		{"running-fairtree.txt", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rep := replay(t, read(tc.file), tc.args...)
			if !rep.OK() {
				t.Errorf("real Slurm 22.05 %s does not replay: %+v", tc.file, rep.Summary)
			}
			for _, e := range rep.Associations {
				if e.Status != drift.StatusOK {
					t.Errorf("%s/%s/%s: %s: drift %s", e.Account, e.User, e.Partition, e.Status, e.Drift)
				}
			}
			checkBlanks(t, rep, captureColumns(t, read(tc.file), tc.args))
		})
	}

	t.Run("fair tree ties", func(t *testing.T) {
		// idle1 and idle2 tie at zero usage beside root's user. Real Slurm
		// does not merge tied sibling accounts (fair_tree.c's
		// _count_tied_accounts always returns 0), unlike the Fair Tree
		// announcement, and walks them in slurmctld's order: lft order,
		// idle2 (created last) first. Its tu2 ties root's user; idle1, tied
		// too, starts with tu1 at the same rank; idle1's 0-share tz0 then
		// drops to the next free rank. Merged, tz0 would come after tu1
		// and tu2 alike; in sshare's order, tu2 would share tz0's rank.
		out := parseCapture(t, read("idle-fairtree-m.txt"))
		tree, order := treeInLftOrder(t, out, read("assoc-lft.tsv"))
		v := tree.FairTree()
		for n, row := range order {
			a, r := tree.Association(n), out.Rows[row]
			if a.IsUser() && math.Abs(v[n].FairShare-r.FairShare) > 1e-6 {
				t.Errorf("%s/%s/%s: FairShare %v in lft order, sshare %v", a.Account, a.User, a.Partition, v[n].FairShare, r.FairShare)
			}
		}
		fs := map[string]float64{}
		for _, r := range out.Rows {
			fs[r.User] = r.FairShare
		}
		if !(fs["tu1"] == fs["tu2"] && fs["tu2"] == fs["root"] && fs["tz0"] < fs["tu1"]) {
			t.Errorf("FairShare tu1 %v, tu2 %v, root %v, tz0 %v: expected tu1 = tu2 = root > tz0", fs["tu1"], fs["tu2"], fs["root"], fs["tz0"])
		}
	})

	t.Run("removed user usage stays on the account", func(t *testing.T) {
		out := parseCapture(t, read("idle-classic.txt"))
		var exp, kids float64
		for _, r := range out.Rows {
			if r.Account == "exp" && r.User == "" {
				exp = r.RawUsage
			} else if r.Account == "exp" {
				kids += r.RawUsage
			}
			if r.User == "rita" {
				t.Errorf("line %d: rita's association was removed but sshare lists it", r.Line)
			}
		}
		if !(exp > kids+1000) {
			t.Errorf("exp RawUsage %v, its users' %v: expected rita's usage to stay on exp (leaf_usage, Slurm 22.05+)", exp, kids)
		}
	})

	t.Run("root user association", func(t *testing.T) {
		// The classic documentation's example has no such row; real Slurm
		// has a root user with 1 share competing with the top accounts.
		out := parseCapture(t, read("idle-classic.txt"))
		r := out.Rows[1]
		if r.Account != "root" || r.User != "root" || r.RawShares != 1 {
			t.Errorf("second row %+v: expected root's user association with 1 share", r)
		}
	})

	t.Run("classic lag while jobs run", func(t *testing.T) {
		// Account values come from the start of the last pass, users mix
		// both moments: replayed from one snapshot, they drift; with the
		// previous snapshot's usage as the pass start, they match.
		prev := parseCapture(t, read("running-classic-1.txt"))
		cur := parseCapture(t, read("running-classic-2.txt"))
		naive := replay(t, read("running-classic-2.txt"))
		// check marks what the lag inferred from the snapshot explains
		// (lag_not_excluded), not drift: the lag still shows
		if naive.Summary.Counts[drift.StatusDrift]+naive.Summary.Counts[drift.StatusLagNotExcluded] == 0 {
			t.Errorf("a one-snapshot replay of classic values while jobs run matched: expected the lag to show")
		}
		if naive.Summary.Counts[drift.StatusDrift] > 0 {
			t.Errorf("a one-snapshot replay of healthy classic values while jobs run: %d drift, expected the lag not excluded", naive.Summary.Counts[drift.StatusDrift])
		}
		t.Logf("one-snapshot replay while jobs run: largest drift %s", naive.Summary.MaxDrift.String())
		rep := replayLagged(t, prev, cur)
		for _, e := range rep.Associations {
			if e.Status != drift.StatusOK {
				t.Errorf("lagged model: %s/%s: %s: drift %s", e.Account, e.User, e.Status, e.Drift)
			}
		}
	})
}

func parseCapture(t *testing.T, b []byte) *shares.Table {
	t.Helper()
	out, err := sshare.Parse(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// replay runs the check command on a capture and decodes its JSON.
func replay(t *testing.T, capture []byte, args ...string) *drift.Report {
	t.Helper()
	f := filepath.Join(t.TempDir(), "sshare.txt")
	if err := os.WriteFile(f, capture, 0o644); err != nil {
		t.Fatal(err)
	}
	code, rep, stderr := checkJSON(t, nil, append([]string{"--sshare-file", f}, args...)...)
	if code == exitError {
		t.Fatalf("check exited %d: %s", code, stderr)
	}
	if (code == 0) != rep.OK() {
		t.Errorf("check exited %d but its report says ok=%v", code, rep.OK())
	}
	return &rep
}

func replayLagged(t *testing.T, prev, cur *shares.Table) *drift.Report {
	t.Helper()
	assocs, err := cur.Associations()
	if err != nil {
		t.Fatal(err)
	}
	tree, err := fairshare.NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	if len(prev.Rows) != len(cur.Rows) {
		t.Fatalf("captures have %d and %d rows", len(prev.Rows), len(cur.Rows))
	}
	prevRaw := make([]float64, len(prev.Rows))
	for i, r := range prev.Rows {
		prevRaw[i] = r.RawUsage
	}
	vals := tree.ClassicLagged(prevRaw, 1)
	// Inputs from two truncated snapshots: the classic bounds of each.
	b := tree.UsageBounds(fairshare.AlgorithmClassic, vals, shares.UsageResolution*2, nil, 1)
	return drift.Compare(fairshare.AlgorithmClassic, 1e-6, drift.FromSshare(cur), drift.FromTree(tree, vals, b))
}

// checkBlanks checks that the values left blank are the ones sshare leaves
// blank, in the columns the capture has, so that a value compared nowhere
// cannot hide.
func checkBlanks(t *testing.T, rep *drift.Report, has func(string) bool) {
	t.Helper()
	columns := []string{shares.NormShares, shares.RawUsage, shares.NormUsage, shares.EffectvUsage, shares.FairShare, shares.LevelFS}
	for _, e := range rep.Associations {
		if e.Computed == nil || e.Reported == nil {
			continue
		}
		c, r := fieldsOf(e.Computed), fieldsOf(e.Reported)
		for k := range c {
			if has(columns[k]) && isNull(c[k]) != isNull(r[k]) {
				t.Errorf("%s/%s %s: computed %v, reported %v: expected both blank or both set", e.Account, e.User, drift.Fields[k], c[k], r[k])
			}
		}
	}
}

// captureColumns tells which columns a capture has; args are check's.
func captureColumns(t *testing.T, b []byte, args []string) func(string) bool {
	fairTree := len(args) == 2 && args[1] == "fair_tree"
	out, err := sshare.Parse(bytes.NewReader(b), func(n int) ([]string, error) { return shares.ColumnsForCount(n, fairTree) })
	if err != nil {
		t.Fatal(err)
	}
	return out.Has
}

func fieldsOf(v *drift.Values) []drift.Num {
	return []drift.Num{v.NormShares, v.RawUsage, v.NormUsage, v.EffectiveUsage, v.FairShare, v.LevelFS}
}

func isNull(n drift.Num) bool { return n != n }

// treeInLftOrder rebuilds the tree of an sshare capture with its rows in
// the database's lft order (lines "lft acct user partition"); order[n] is
// the row of association n. The capture needs sshare -m.
func treeInLftOrder(t *testing.T, out *shares.Table, tsv []byte) (tree *fairshare.Tree, order []int) {
	t.Helper()
	pos := map[result.AssocKey]int{}
	for i, l := range strings.Split(strings.TrimRight(string(tsv), "\n"), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			t.Fatalf("assoc-lft.tsv line %d: %q", i+1, l)
		}
		pos[result.AssocKey{Account: f[1], User: f[2], Partition: f[3]}] = i
	}
	assocs, err := out.Associations()
	if err != nil {
		t.Fatal(err)
	}
	order = make([]int, len(assocs))
	for i := range order {
		order[i] = i
	}
	key := func(i int) int {
		a := assocs[i]
		p, ok := pos[result.KeyOf(a.Account, a.User, a.Partition)]
		if !ok {
			t.Fatalf("%s/%s is not in assoc-lft.tsv", a.Account, a.User)
		}
		return p
	}
	sort.SliceStable(order, func(x, y int) bool { return key(order[x]) < key(order[y]) })
	newIndex := make([]int, len(order))
	for n, old := range order {
		newIndex[old] = n
	}
	re := make([]fairshare.Association, len(assocs))
	for n, old := range order {
		re[n] = assocs[old]
		if re[n].Parent >= 0 {
			re[n].Parent = newIndex[re[n].Parent]
		}
	}
	tree, err = fairshare.NewTree(re)
	if err != nil {
		t.Fatal(err)
	}
	return tree, order
}

// TestGoldenDatabaseReplay judges the recorded database check of
// TestRealSlurmReplay (make record) as it was judged live.
func TestGoldenDatabaseReplay(t *testing.T) {
	t.Parallel()
	eachCapture(t, "golden", judgeDatabase)
}

// judgeDatabase fails t where check's database mode, while the golden
// jobs run, is not sshare's: the tree and shares must be sshare's, raw
// usage within 0.5% and FairShare within 0.01 (the command's defaults).
func judgeDatabase(t *testing.T, code int, rep drift.Report, stderr string) {
	t.Helper()
	t.Logf("database mode while jobs run: %+v, largest drift %s, note %q", rep.Summary.Counts, rep.Summary.MaxDrift.String(), rep.Note)
	worst := 0.0
	for _, e := range rep.Associations {
		if e.Status != drift.StatusOK {
			t.Errorf("%s/%s/%s: %s: computed %s, reported %s", e.Account, e.User, e.Partition, e.Status, e.Computed, e.Reported)
			continue
		}
		if r := float64(e.Reported.RawUsage); r > 0 {
			worst = math.Max(worst, math.Abs(float64(e.Drift.RawUsage))/r)
		}
		// With slurmctld's boot time the order of tied accounts is known:
		// FairShare within 0.01 everywhere, ties included.
		if d := float64(e.Drift.FairShare); math.Abs(d) > 0.01 {
			t.Errorf("%s/%s: FairShare drift %v", e.Account, e.User, d)
		}
	}
	t.Logf("largest relative RawUsage drift: %.4f%%", 100*worst)
	if code != 0 || strings.Contains(rep.Note, "unknown") {
		t.Errorf("exit %d, note %q: %s", code, rep.Note, stderr)
	}
}

// checkJSON runs the check command with args in env (nil: this process's;
// a cluster's Env carries its time zone) and decodes its JSON report.
func checkJSON(t *testing.T, env []string, args ...string) (code int, rep drift.Report, stderr string) {
	t.Helper()
	code, out, stderr := runExporterEnv(t, env, append([]string{"check", "--output", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check %v exited %d: %v\n%s\n%s", args, code, err, out, stderr)
	}
	return code, rep, stderr
}

// readerDSNFile creates a SELECT-only database user for the exporter and
// writes its DSN to a file.
func readerDSNFile(t testing.TB, c *slurmharness.Cluster) string {
	t.Helper()
	c.DB.CreateReader("exporter", "pw", "slurm_acct_db")
	return writeDSN(t, c.DB.DSN("exporter", "pw", "slurm_acct_db"))
}

// loadTwoAccounts builds the small tree several tests share: phys (40)
// with alice (1) and bob (2), chem (60) with carol (1) and the extra
// users (1 each), their Unix users first.
func loadTwoAccounts(c *slurmharness.Cluster, extra ...string) {
	users := append([]string{"alice", "bob", "carol"}, extra...)
	for _, u := range users {
		c.EnsureUnixUser(u)
	}
	tree := [][]string{
		{"add", "account", "phys", "parent=root", "fairshare=40"},
		{"add", "account", "chem", "parent=root", "fairshare=60"},
		{"add", "user", "alice", "account=phys", "fairshare=1"},
		{"add", "user", "bob", "account=phys", "fairshare=2"},
		{"add", "user", "carol", "account=chem", "fairshare=1"},
	}
	for _, u := range extra {
		tree = append(tree, []string{"add", "user", u, "account=chem", "fairshare=1"})
	}
	c.LoadTree(tree)
	// slurmctld learns them from slurmdbd a moment later: a job submitted
	// before is refused (TestReadBudget's bob, with 10,000 associations
	// and a second real-Slurm test on the machine)
	c.WaitUsers([]string{"phys", "chem"}, users...)
}
