package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// Recordings: the live tests that wait for real time on real Slurm
// (make test-live) write, with SLURMDBD_EXPORTER_RECORD=1 (make record),
// a capture of the cluster at each moment they judge
// (slurmharness.Capture) and what the judgement needs beside check's
// report (event.json). make test replays every capture through the built
// binary (check on the loaded dump, --at the moment sshare was read) and
// judges it with the same code as the live run: the proof of hours of
// real Slurm in seconds. testdata/recordings/README.md names the runs.
const recordings = "../testdata/recordings"

// recording reports whether this run writes recordings.
func recording() bool { return os.Getenv("SLURMDBD_EXPORTER_RECORD") == "1" }

// startRun empties a run's directory (its captures are rewritten) and
// notes the machine it is recorded on, for the recordings' README.
func startRun(t *testing.T, run string) {
	t.Helper()
	if err := os.RemoveAll(run); err != nil {
		t.Fatal(err)
	}
	err := os.MkdirAll(run, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(run, "machine"), []byte(fmt.Sprintf("%d cores, %s\n", runtime.NumCPU(), cpuModel())), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// cpuModel is this machine's CPU as /proc/cpuinfo names it.
func cpuModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

// eventFile is a capture's judgement inputs, as the test wrote them.
const eventFile = "event.json"

// recordEvent captures the cluster into dir with ev beside it.
func recordEvent(t *testing.T, c *slurmharness.Cluster, dir string, ev any) slurmharness.Moment {
	t.Helper()
	m := c.Capture(dir)
	writeEvent(t, dir, ev)
	return m
}

// writeEvent writes ev as dir's event.json.
func writeEvent(t *testing.T, dir string, ev any) {
	t.Helper()
	b, err := json.MarshalIndent(ev, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, eventFile), append(b, '\n'), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readEvent reads a capture's event.json into ev.
func readEvent(t *testing.T, dir string, ev any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, eventFile))
	if err == nil {
		err = json.Unmarshal(b, ev)
	}
	if err != nil {
		t.Fatalf("recording %s: %v", dir, err)
	}
}

// recorded lists the capture directories under testdata/recordings/dir
// (a run: one directory of captures in the order taken, by name); none is
// a failure, not a skip: the recordings are committed.
func recorded(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(recordings, dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == slurmharness.CaptureMoment {
			out = append(out, filepath.Dir(p))
		}
		return err
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("no recordings in %s (%v): make record writes them", filepath.Join(recordings, dir), err)
	}
	sort.Strings(out)
	return out
}

// eachCapture replays every recorded capture of kind (a directory under
// testdata/recordings) through check as the live run did, and judges the
// report with judge, as the live run's was.
func eachCapture(t *testing.T, kind string, judge func(t *testing.T, code int, rep drift.Report, stderr string)) {
	t.Helper()
	r := newReplayer(t)
	for _, dir := range recorded(t, kind) {
		rel, _ := filepath.Rel(recordings, dir)
		t.Run(rel, func(t *testing.T) {
			code, rep, stderr := r.check(t, dir)
			judge(t, code, rep, stderr)
		})
	}
}

// eachRun replays every recorded run of kind whose judgement spans its
// captures (kind/<release>: 01, 02 and the run's event.json) with replay,
// a subtest a release.
func eachRun(t *testing.T, kind string, replay func(t *testing.T, r *replayer, run string)) {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(recordings, kind, "*"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("no recordings in %s (%v): make record writes them", filepath.Join(recordings, kind), err)
	}
	r := newReplayer(t)
	for _, run := range runs {
		t.Run(filepath.Base(run), func(t *testing.T) { replay(t, r, run) })
	}
}

// replayer loads captures into a MariaDB of its own (a database each)
// and runs check on them as the live run did; one goroutine uses it (the
// subtests that replay run in turn).
type replayer struct {
	db *mariadbtest.Server
	n  int // databases loaded: each capture gets the next name
}

func newReplayer(t *testing.T) *replayer { return &replayer{db: mariadbtest.Start(t, "")} }

// replayerOn loads captures into an existing server (a live cluster's,
// to replay what was just recorded).
func replayerOn(db *mariadbtest.Server) *replayer { return &replayer{db: db} }

// loaded is a capture whose dump a replayer loaded.
type loaded struct {
	dir, dsnFile string
	db           string // the database it is loaded in
	moment       slurmharness.Moment
}

// load loads dir's dump into a database of its own.
func (r *replayer) load(t *testing.T, dir string) loaded {
	t.Helper()
	m, err := slurmharness.ReadMoment(dir)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	setConfTime(t, abs)
	r.n++
	name := fmt.Sprintf("replay%d", r.n)
	r.db.Load(name, filepath.Join(dir, slurmharness.CaptureDump))
	r.db.CreateReader("replayer", "pw", name)
	return loaded{dir: abs, dsnFile: writeDSN(t, r.db.DSN("replayer", "pw", name)), db: name, moment: m}
}

// setConfTime gives the capture's slurm.conf the time slurmctld booted
// with it (BOOT_TIME in the captured scontrol show config, in the captured
// zone), for the rebuild's BillingRules.Since: the harness writes slurm.conf
// right before a start, and a checkout gives the copy its own time.
func setConfTime(t *testing.T, dir string) {
	t.Helper()
	zone, err := os.ReadFile(filepath.Join(dir, slurmharness.CaptureZone))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocationFromTZData("capture", zone)
	if err != nil {
		t.Fatal(err)
	}
	config := readFile(t, filepath.Join(dir, slurmharness.CaptureConfig))
	boot, err := sshare.ParseBootTime(strings.NewReader(config))
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	// scontrol prints the cluster's wall clock
	boot = time.Date(boot.Year(), boot.Month(), boot.Day(), boot.Hour(), boot.Minute(), boot.Second(), 0, loc)
	if err := os.Chtimes(filepath.Join(dir, slurmharness.CaptureSlurmConf), boot, boot); err != nil {
		t.Fatal(err)
	}
}

// in is a file of the capture.
func (l loaded) in(name string) string { return filepath.Join(l.dir, name) }

// env is the environment a replay runs in: the captured time zone.
func (l loaded) env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "TZ=" + l.in(slurmharness.CaptureZone)}
}

// inputs are the flags that give the exporter the captured cluster as a
// live run read it: the loaded dump, slurm.conf and the pass phase.
func (l loaded) inputs() []string {
	return []string{"--dsn-file", l.dsnFile, "--slurm-conf", l.in(slurmharness.CaptureSlurmConf),
		"--slurm.state-dir", l.in(slurmharness.CaptureState)}
}

// boot gives slurmctld's boot as a live run that read sshare asked it.
func (l loaded) boot() []string {
	return []string{"--slurmctld.config-file", l.in(slurmharness.CaptureConfig)}
}

// check runs check in database mode on the loaded capture as the live
// run did: sshareFile ("": the captured one) read at the captured
// moments, slurmctld's boot from the captured scontrol show config, the
// captured pass phase and time zone; args are added.
func (l loaded) check(t *testing.T, sshareFile string, args ...string) (code int, rep drift.Report, stderr string) {
	t.Helper()
	return checkJSON(t, l.env(), append(l.checkArgs(sshareFile), args...)...)
}

// checkArgs are the flags of l.check's check (sshareFile "": the
// captured one).
func (l loaded) checkArgs(sshareFile string) []string {
	if sshareFile == "" {
		sshareFile = l.in(slurmharness.CaptureSshare)
	}
	at := []string{"--sshare-file", sshareFile, "--at", l.moment.At()}
	if l.moment.Dumped > 0 {
		at = append(at, "--database-at", fmt.Sprintf("%.6f", l.moment.Dumped))
	}
	return append(append(l.inputs(), l.boot()...), at...)
}

// check loads dir's capture and checks it as the live run did.
func (r *replayer) check(t *testing.T, dir string, args ...string) (code int, rep drift.Report, stderr string) {
	t.Helper()
	return r.load(t, dir).check(t, "", args...)
}

// computedApart is the largest difference, relative to root's, between
// two reports' computed RawUsage of one association, and which: a live
// check and the replay of the capture taken right after it compute the
// same moment but for the seconds between them.
func computedApart(a, b drift.Report) (worst float64, which string) {
	key := func(e drift.Entry) string { return strings.Join([]string{e.Account, e.User, e.Partition}, "/") }
	got := map[string]float64{}
	var root float64
	for _, e := range b.Associations {
		if e.Computed != nil {
			got[key(e)] = float64(e.Computed.RawUsage)
			if e.Depth == 0 {
				root = float64(e.Computed.RawUsage)
			}
		}
	}
	for _, e := range a.Associations {
		if e.Computed == nil || root <= 0 {
			continue
		}
		g, ok := got[key(e)]
		d := math.Abs(g-float64(e.Computed.RawUsage)) / root
		if !ok {
			d = math.Inf(1)
		}
		if d > worst {
			worst, which = d, key(e)
		}
	}
	return worst, which
}

// withLoss is sshare -a -l -P text in which the association of account
// and user has lost frac of its RawUsage, and each of its ancestors the
// same amount: a loss as slurmctld's tree holds it (sshare indents an
// association by its depth). The user's usage before the loss is
// returned too.
func withLoss(text, account, user string, frac float64) (string, float64, error) {
	lines := strings.SplitAfter(text, "\n")
	col := slices.Index(strings.Split(strings.TrimSpace(lines[0]), "|"), "RawUsage")
	if col < 0 {
		return "", 0, fmt.Errorf("no RawUsage column in %q", lines[0])
	}
	// ancestors[d]: the line of the last account seen at depth d
	var ancestors []int
	for i := 1; i < len(lines); i++ {
		f := strings.Split(lines[i], "|")
		if len(f) <= col {
			continue
		}
		depth := len(f[0]) - len(strings.TrimLeft(f[0], " "))
		if f[1] == "" {
			ancestors = append(ancestors[:min(depth, len(ancestors))], i)
			continue
		}
		if strings.TrimSpace(f[0]) != account || f[1] != user {
			continue
		}
		used, err := strconv.ParseFloat(f[col], 64)
		if err != nil {
			return "", 0, err
		}
		loss := math.Round(frac * used)
		for _, j := range append(slices.Clone(ancestors[:min(depth, len(ancestors))]), i) {
			g := strings.Split(lines[j], "|")
			v, err := strconv.ParseFloat(g[col], 64)
			if err != nil {
				return "", 0, err
			}
			g[col] = strconv.FormatFloat(v-loss, 'f', 0, 64)
			lines[j] = strings.Join(g, "|")
		}
		return strings.Join(lines, ""), used, nil
	}
	return "", 0, fmt.Errorf("no association %s/%s", account, user)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
