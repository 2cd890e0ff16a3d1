package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// sprioFormat asks sprio for every factor, normalized (lower case) and
// weighted (upper case), of each pending job and partition.
// 22.05's sprio -o drops %o (account) and %n (QOS name).
const sprioFormat = "%i|%r|%u|%a|%b|%f|%j|%p|%q|%t|%A|%B|%F|%J|%P|%Q|%T|%Y"

// sprioRow is one line of sprio -o sprioFormat.
type sprioRow struct {
	job, partition, user string
	norm, weighted       priority.Factors
	tresNorm             map[string]float64
	prio                 float64
}

// jobExplanation is what the test reads of explain --job --output json;
// factors come in priority.Factor order.
type jobExplanation struct {
	Partition string    `json:"partition"`
	Account   string    `json:"account"`
	User      string    `json:"user"`
	Priority  drift.Num `json:"priority"`
	Factors   []struct {
		Factor     string    `json:"factor"`
		Normalized drift.Num `json:"normalized"`
		Weight     float64   `json:"weight"`
	} `json:"factors"`
	TRES map[string]drift.Num `json:"tres"`
}

func parseSprio(t *testing.T, out string) map[string]sprioRow {
	t.Helper()
	rows := map[string]sprioRow{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) != 18 {
			t.Fatalf("sprio line %q: expected 18 fields", l)
		}
		r := sprioRow{job: f[0], partition: f[1], user: f[2], tresNorm: map[string]float64{}}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				t.Fatalf("sprio line %q: field %q: %v", l, s, err)
			}
			return v
		}
		for i, k := range []priority.Factor{priority.Age, priority.Assoc, priority.FairShare, priority.JobSize, priority.Partition, priority.QOS} {
			r.norm[k], r.weighted[k] = num(f[3+i]), num(f[10+i])
		}
		for _, kv := range strings.Split(f[9], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				r.tresNorm[strings.ToLower(k)] = num(v)
			}
		}
		for _, kv := range strings.Split(f[16], ",") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				r.weighted[priority.TRES] += num(v)
			}
		}
		r.prio = num(f[17])
		rows[r.job+"/"+r.partition] = r
	}
	return rows
}

// TestSprioRealSlurm computes pending jobs' priorities from the database
// and slurm.conf of a real Slurm 22.05 with every weight non-zero, jobs
// under several accounts, partitions (one job in two) and QOS, and checks
// each against sprio taken right after the same decay pass (judgeSprio).
// Recording (make record), the cluster is captured with sprio's output
// (01) and after one job started (02), and TestSprioReplay judges the
// captures alike.
func TestSprioRealSlurm(t *testing.T) {
	// limits: slurmctld charges a finished job's last partial pass, so
	// the usage before the pending jobs is all charged
	c := slurmharness.Start(t, slurmharness.Config{CPUs: 256, Enforce: "associations,limits",
		Partitions:    []string{"p1 PriorityJobFactor=10", "p2 PriorityJobFactor=40"},
		PriorityFlags: "ACCRUE_ALWAYS",
		Priority: []string{"PriorityWeightFairshare=100000", "PriorityWeightAge=1000", "PriorityWeightJobSize=2000",
			"PriorityWeightPartition=3000", "PriorityWeightQOS=5000", "PriorityWeightAssoc=700",
			"PriorityWeightTRES=CPU=4000,Mem=1500", "PriorityMaxAge=0-00:10:00"},
	})
	loadTwoAccounts(c)
	c.Sacctmgr("add", "qos", "high", "priority=100")
	c.Sacctmgr("add", "qos", "low", "priority=10")
	for _, u := range []string{"alice", "bob", "carol"} {
		c.Sacctmgr("modify", "user", "where", "name="+u, "set", "qos+=high,low")
	}
	// association priority: phys's is inherited by alice and bob, carol
	// has her own
	c.Sacctmgr("modify", "account", "where", "name=phys", "set", "priority=50")
	c.Sacctmgr("modify", "user", "where", "name=carol", "set", "priority=20")

	// usage first, so that fairshare factors differ
	used := []string{c.Submit("alice", "phys", "p1", 96, 40), c.Submit("carol", "chem", "p2", 32, 40), c.Submit("bob", "phys", "p2", 8, 40)}
	c.WaitRunning(2*time.Minute, used...)
	c.WaitGone(3*time.Minute, used...)
	c.MustRun("scontrol", "update", "nodename=n1", "state=drain", "reason=sprio test")

	ev := sprioEvent{Pending: map[string]string{}}
	ev.Pending[c.Submit("alice", "phys", "p1", 8, 60, "--qos=high")] = sprioStarts
	ev.Pending[c.Submit("alice", "phys", "p2", 32, 60)] = "alice p2 normal"
	ev.Pending[c.Submit("bob", "phys", "p1,p2", 4, 60, "--qos=low")] = "bob p1,p2 low"
	ev.Pending[c.Submit("carol", "chem", "p2", 128, 60, "--qos=high", "-N", "1")] = "carol p2 high"
	ev.Pending[c.Submit("bob", "phys", "p2", 2, 60, "--begin=now+3600")] = "bob later begin"
	ev.Held = c.Submit("carol", "chem", "p1", 1, 60, "--hold")

	// sprio and sshare right after one pass, before the next (recording:
	// the capture's sshare, and its dump, inside the same pass)
	run := filepath.Join(recordings, "sprio", "22.05")
	if recording() {
		startRun(t, run)
	}
	var sprio, ss string
	for try := 0; ; try++ {
		c.WaitDecayPass()
		before := c.LastDecayRan()
		sprio = c.MustRun("sprio", "-h", "-o", sprioFormat)
		if recording() {
			dir := filepath.Join(run, "01")
			c.Capture(dir)
			ss = readFile(t, filepath.Join(dir, slurmharness.CaptureSshare))
			if err := os.WriteFile(filepath.Join(dir, sprioFile), []byte(sprio), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			ss = c.Sshare("-a", "-l", "-P")
		}
		if !bytes.Equal(before, c.LastDecayRan()) && try < 3 {
			continue
		}
		break
	}
	ran, _, err := slurmstate.LastDecayRan(c.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	ev.Ran = ran.Unix()
	inputs := []string{"--dsn-file", readerDSNFile(t, c), "--slurm-conf", c.Conf}
	explain := func(args ...string) (int, string, string) {
		return runExporter(t, append(append([]string{"explain"}, args...), inputs...)...)
	}
	first := judgeSprio(t, explain, ev, sprio, ss)
	// --at a moment the job was pending, after it started: the same
	c.MustRun("scontrol", "update", "nodename=n1", "state=resume")
	c.WaitRunning(2*time.Minute, ev.started())
	judgeStarted(t, explain, ev, first)
	if recording() {
		c.Capture(filepath.Join(run, "02"))
		writeEvent(t, run, ev)
		replaySprio(t, replayerOn(c.DB), run)
	}
}

// TestSprioReplay judges every recorded sprio run as TestSprioRealSlurm
// judged it live.
func TestSprioReplay(t *testing.T) {
	t.Parallel()
	eachRun(t, "sprio", replaySprio)
}

// replaySprio runs explain --job on a recorded sprio run's captures and
// judges it as the live run was judged.
func replaySprio(t *testing.T, r *replayer, run string) {
	t.Helper()
	var ev sprioEvent
	readEvent(t, run, &ev)
	pending, started := r.load(t, filepath.Join(run, "01")), r.load(t, filepath.Join(run, "02"))
	on := func(l loaded) func(args ...string) (int, string, string) {
		return func(args ...string) (int, string, string) {
			return runExporterEnv(t, l.env(), append(append([]string{"explain"}, args...), l.inputs()...)...)
		}
	}
	first := judgeSprio(t, on(pending), ev, readFile(t, pending.in(sprioFile)), readFile(t, pending.in(slurmharness.CaptureSshare)))
	judgeStarted(t, on(started), ev, first)
}

// sprioMaxAge is PriorityMaxAge in seconds (0-00:10:00 in slurm.conf):
// short, so that age moves visibly.
const sprioMaxAge = 600

// sprioFile is sprio -h -o sprioFormat in a recording's first capture.
const sprioFile = "sprio.txt"

// sprioStarts is the pending job that is started after sprio is read.
const sprioStarts = "alice p1 high"

// sprioEvent is what TestSprioRealSlurm judges beside sprio and sshare:
// the pending jobs (id: what), the held one and the pass sprio shows
// (unix seconds).
type sprioEvent struct {
	Pending map[string]string `json:"pending"`
	Held    string            `json:"held"`
	Ran     int64             `json:"ran"`
}

func (ev sprioEvent) started() string {
	for id, what := range ev.Pending {
		if what == sprioStarts {
			return id
		}
	}
	return ""
}

// judgeSprio compares explain --job (run by explain, --at the pass) for
// each pending job with sprio's line (taken right after that pass): every
// normalized factor within sprio's print precision (%.7f; TRES %.2f), the
// priority within 1. Age: ACCRUE_ALWAYS makes the accrue time the submit
// time, which the database holds exactly; the pass's moment is
// priority_last_decay_ran, and a second is allowed for it. Fairshare: the
// factor from sshare's FairShare must give sprio's exactly (the formula),
// the one rebuilt from the database within the usage tolerance. A held job
// and one with a later begin time are checked too: sprio leaves out the
// first and, with ACCRUE_ALWAYS, lists the second. It returns each job
// partition's priority.
func judgeSprio(t *testing.T, explain func(args ...string) (int, string, string), ev sprioEvent, sprioOut, ss string) map[string]float64 {
	t.Helper()
	t.Logf("sprio after the pass of %s:\n%s", time.Unix(ev.Ran, 0).Format(time.RFC3339), sprioOut)
	sprio := parseSprio(t, sprioOut)
	report := parseSshare(t, ss)
	if len(sprio) != 6 { // bob's job in two partitions
		t.Fatalf("sprio lists %d job partitions, want 6: %v", len(sprio), sprio)
	}
	if _, ok := sprio[ev.Held+"/p1"]; ok {
		t.Errorf("sprio lists held job %s", ev.Held)
	}
	first, seen := explainAgainstSprio(t, explain, ev.Ran, ev.Pending, sprio, report, sprioMaxAge)
	if seen != len(sprio) {
		t.Errorf("compared %d job partitions, sprio lists %d", seen, len(sprio))
	}
	if code, _, errOut := explain("--job", ev.Held, "--reported.source", "none"); code != 2 || !strings.Contains(errOut, "held") {
		t.Errorf("explain --job %s (held): exit %d, want 2 and a reason naming held jobs\n%s", ev.Held, code, errOut)
	}
	return first
}

// judgeStarted: explain --job --at the pass sprio showed, on the database
// after the job started, gives the priority it had while pending (first).
func judgeStarted(t *testing.T, explain func(args ...string) (int, string, string), ev sprioEvent, first map[string]float64) {
	t.Helper()
	started := ev.started()
	code, out, errOut := explain("--job", started, "--at", fmt.Sprint(ev.Ran), "--reported.source", "none", "--output", "json")
	var exps []jobExplanation
	if err := json.Unmarshal([]byte(out), &exps); code != 0 || err != nil || len(exps) != 1 {
		t.Fatalf("explain --job %s --at (started since): exit %d, %v\n%s\n%s", started, code, err, out, errOut)
	}
	if p := float64(exps[0].Priority); math.Abs(p-first[started+"/p1"]) > 2 {
		t.Errorf("job %s after it started, --at when it was pending: priority %.0f, before %.0f", started, p, first[started+"/p1"])
	}
}

// explainAgainstSprio runs explain --job (by explain, --at ran) for each
// pending job (id: what it is) and compares each of its partitions with
// sprio's line (checkAgainstSprio), the fairshare formula on sshare's
// FairShare (report). It returns each job partition's priority and how
// many of sprio's lines it compared.
func explainAgainstSprio(t *testing.T, explain func(args ...string) (int, string, string), ran int64, pending map[string]string,
	sprio map[string]sprioRow, report *shares.Table, maxAge float64) (first map[string]float64, seen int) {
	t.Helper()
	reported := map[string]float64{} // account/user: FairShare
	for _, r := range report.Rows {
		reported[r.Account+"/"+r.User] = r.FairShare
	}
	first = map[string]float64{} // job/partition: priority
	for id, what := range pending {
		code, out, errOut := explain("--job", id, "--at", fmt.Sprint(ran), "--reported.source", "none", "--output", "json")
		var exps []jobExplanation
		if err := json.Unmarshal([]byte(out), &exps); code != 0 || err != nil {
			t.Fatalf("explain --job %s (%s): exit %d, %v\n%s\n%s", id, what, code, err, out, errOut)
		}
		for _, x := range exps {
			s, ok := sprio[id+"/"+x.Partition]
			if !ok {
				t.Errorf("job %s (%s) partition %s: computed, but sprio does not list it", id, what, x.Partition)
				continue
			}
			seen++
			first[id+"/"+x.Partition] = float64(x.Priority)
			checkAgainstSprio(t, id+" ("+what+") in "+x.Partition, x, s, reported[x.Account+"/"+x.User], maxAge)
		}
	}
	return first, seen
}

// parseSshare parses sshare -a -l -P output.
func parseSshare(t *testing.T, ss string) *shares.Table {
	t.Helper()
	report, err := sshare.Parse(strings.NewReader(ss), nil)
	if err != nil {
		t.Fatal(err)
	}
	return report
}

func checkAgainstSprio(t *testing.T, what string, x jobExplanation, s sprioRow, reportedFS float64, maxAge float64) {
	t.Helper()
	const print7 = 0.5e-7 + 1e-9
	for _, f := range x.Factors {
		k := factorIndex(t, f.Factor)
		tol := print7
		switch k {
		case priority.Age:
			tol += 1 / maxAge // the pass's second
		case priority.FairShare:
			tol = 0.01 // usage rebuilt from the database (DefaultTolerance.Factor)
		case priority.TRES:
			continue // per TRES below
		}
		if d := math.Abs(float64(f.Normalized) - s.norm[k]); !(d <= tol) {
			t.Errorf("job %s: %s %.7f, sprio %.7f (tolerance %.1g)", what, f.Factor, float64(f.Normalized), s.norm[k], tol)
		}
	}
	for name, v := range s.tresNorm {
		if d := math.Abs(float64(x.TRES[name]) - v); !(d <= 0.005+1e-9) {
			t.Errorf("job %s: tres %s %.4f, sprio %.2f", what, name, float64(x.TRES[name]), v)
		}
	}
	// the formula on Slurm's own fairshare: sprio's factor within print
	// precision of sshare's FairShare (printed to 6 places)
	if d := math.Abs(reportedFS - s.norm[priority.FairShare]); !(d <= 0.5e-6+print7) {
		t.Errorf("job %s: sprio fairshare %.7f, sshare FairShare %.6f", what, s.norm[priority.FairShare], reportedFS)
	}
	// the priority from sprio's factors but our fairshare: the rest adds
	// up as slurmctld adds it, but for sprio's rounding of the weighted
	// fairshare, the truncations and the pass's second of age
	fsWeight := x.Factors[priority.FairShare].Weight
	ownFS := float64(x.Factors[priority.FairShare].Normalized)
	want := s.prio - s.weighted[priority.FairShare] + ownFS*fsWeight
	if d := math.Abs(float64(x.Priority) - want); !(d <= 2+x.Factors[priority.Age].Weight/maxAge) {
		t.Errorf("job %s: priority %.0f, sprio %.0f (%.0f with our fairshare)", what, float64(x.Priority), s.prio, want)
	}
}

func factorIndex(t *testing.T, name string) priority.Factor {
	for f := priority.Factor(0); f < priority.NumFactors; f++ {
		if f.String() == name {
			return f
		}
	}
	t.Fatalf("unknown factor %q", name)
	return 0
}
