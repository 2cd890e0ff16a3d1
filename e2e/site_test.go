package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// TestSiteShapedLive runs real Slurm configured as sites run it (22.05;
// $SLURMDBD_EXPORTER_RELEASES names others, make record all three), and
// compares check's database rebuild with slurmctld's RawUsage at five
// moments: jobs running with some pending (pending; explain --job is
// compared with sprio there too), jobs running before slurmdbd's hourly
// rollup (loaded), right after it (rollup), all jobs ended (idle), and
// jobs running after a restart of slurmctld with PriorityFlags=MAX_TRES
// (max_tres: the jobs before it were billed without, so their records no
// longer price under the flags, and the bound's unpriced_billing holds
// them).
//
// The cluster: AccountingStorageEnforce=associations,limits,qos,safe,
// Fair Tree, a 1-hour half-life, memory a consumable resource
// (CR_Core_Memory, DefMemPerCPU), two nodes of 4 GPUs (gres), partitions cpu and gpu
// with TRESBillingWeights (memory per GB, GPUs 16 each) and debug with
// none and a PriorityJobFactor of its own, QOS high (UsageFactor=2,
// preempts scavenger) and scavenger (UsageFactor=0) beside normal,
// preemption by QOS with requeue, an account tree four levels deep with a
// FairShare=parent account, a user in two accounts and a partition
// association. The jobs run in every partition and QOS, their memory and
// GPUs chosen so that billing is fractional (slurmctld charges the
// unrounded billing, slurmdbd stores it truncated), and go through what
// production jobs do: an array, a cancel while running, a time-limit kill,
// a suspend and resume, a requeue, a scavenger job preempted (requeued)
// by a high one, a pending job cancelled, a heterogeneous job across the
// two nodes.
//
// Serve watches it throughout, with Prometheus evaluating the shipped
// rules (watch): no scrape may have an association beyond tolerance,
// and no alert may be pending or firing until idle (the restart after it
// takes slurmctld away for a moment, which the rules rightly note).
//
// What the issue asks (siteEvent.judge): check exits 0 at every moment,
// and when idle every user holding 1% of root's usage or more is within
// 0.5% of slurmctld's RawUsage. Before the exporter charges the unrounded
// billing and QOS UsageFactor on rolled-up hours (issue 42), this fails;
// the judge logs what it measured either way, and the captures are
// recorded whatever it says.
//
// Two nodes, two slurmd on this host (Config.Nodes): a heterogeneous
// job's components never share a node (on one node its second component
// pended on Resources while the node had room, and held back the jobs of
// the partitions below it).
//
// Under CI=true a missing Slurm or MariaDB fails the test rather than
// skipping it (slurmharness.Start, mariadbtest.Start: testenv.Require).
func TestSiteShapedLive(t *testing.T) {
	t.Parallel()
	for _, release := range liveReleases() {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			siteShaped(t, release)
		})
	}
}

// TestSiteShapedReplay judges every recorded capture of the site-shaped
// cluster (make record: TestSiteShapedLive) as the live run judged it,
// through the built binary on the captured database; and, as
// TestHistoryReplay does, that a 10% loss of each user holding 5% of
// root's usage or more is flagged, the state file and boot known.
func TestSiteShapedReplay(t *testing.T) {
	t.Parallel()
	replayJudged(t, "site")
}

// replayJudged judges every capture recorded under kind with a siteEvent
// beside it, through the built binary on the captured database, as the
// live run judged it (siteEvent.judge, and sprio where it was read); and
// that a 10% loss of each user holding 5% of root's usage or more is
// flagged.
func replayJudged(t *testing.T, kind string) {
	r := newReplayer(t)
	for _, dir := range recorded(t, kind) {
		rel, _ := filepath.Rel(recordings, dir)
		t.Run(rel, func(t *testing.T) {
			var ev siteEvent
			readEvent(t, dir, &ev)
			l := r.load(t, dir)
			code, rep, stderr := l.check(t, "")
			ev.judge(t, code, rep, stderr)
			if ev.Pending != nil {
				ev.judgeSprio(t, func(args ...string) (int, string, string) {
					return runExporterEnv(t, l.env(), append(append([]string{"explain"}, args...), l.inputs()...)...)
				}, readFile(t, l.in(sprioFile)), readFile(t, l.in(slurmharness.CaptureSshare)))
			}
			partsAddUp(t, rep)
			s := boundShares(rep)
			slices.Sort(s)
			losses, missed := lossesFlagged(t, l, rep, 0.1)
			t.Logf("%s: bound as a share of usage (users at 5%% of root or more): %.2f (%%); 10%% losses flagged: %d of %d", ev.Name, percents(s), losses-len(missed), losses)
			if losses == 0 {
				t.Error("no user at 5% of root's usage to lose 10% of")
			}
			for _, m := range missed {
				t.Errorf("10%% loss not flagged: %s", m)
			}
		})
	}
}

// percents are fractions as percentages.
func percents(s []float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = 100 * v
	}
	return out
}

// siteEvent is what judging one moment of the site-shaped cluster needs
// beyond check's report, and what a reader of the recording needs to
// know of it.
type siteEvent struct {
	Name string `json:"name"`
	// Idle: every job has ended, and users must match slurmctld within
	// Target.
	Idle bool `json:"idle"`
	// Target is the largest relative RawUsage difference allowed on a
	// user holding MinShare of root's usage or more, when idle.
	Target   float64 `json:"target"`
	MinShare float64 `json:"min_share"`
	// Done is what happened to the jobs before the capture, in order.
	Done []string `json:"done"`
	// Jobs is squeue at the capture: id, state, partition, QOS, user,
	// account, TRES.
	Jobs []string `json:"jobs"`
	// HourlyRollup is slurmdbd's last_ran hourly_rollup then (unix
	// seconds): the hours before it are read from the rollup tables.
	HourlyRollup int64 `json:"hourly_rollup"`
	// Pending are the jobs that could not start (id: what), compared with
	// sprio.txt, sprio's lines right after the decay pass of SprioRan
	// (unix seconds).
	Pending  map[string]string `json:"pending,omitempty"`
	SprioRan int64             `json:"sprio_ran,omitempty"`
}

// judgeSprio compares explain --job (run by explain) with sprio's lines
// for the moment's pending jobs, every factor (explainAgainstSprio); ss
// is sshare's output at the moment.
func (ev siteEvent) judgeSprio(t *testing.T, explain func(args ...string) (int, string, string), sprioOut, ss string) {
	t.Helper()
	sprio := parseSprio(t, sprioOut)
	listed := 0
	for key := range sprio {
		if job, _, _ := strings.Cut(key, "/"); ev.Pending[job] != "" {
			listed++
		}
	}
	// PriorityMaxAge is the default, 7 days
	_, seen := explainAgainstSprio(t, explain, ev.SprioRan, ev.Pending, sprio, parseSshare(t, ss), 7*86400)
	t.Logf("%s: explain --job against sprio: %d job partitions of %d pending jobs compared, sprio lists %d", ev.Name, seen, len(ev.Pending), listed)
	if seen != listed || seen < len(ev.Pending) {
		t.Errorf("%s: compared %d job partitions, sprio lists %d of the %d pending jobs", ev.Name, seen, listed, len(ev.Pending))
	}
}

// judge fails t where check's report of the moment does not hold what
// issue 42 asks, and logs what it measured: the largest relative RawUsage
// difference, each association's, what check flagged and why.
func (ev siteEvent) judge(t *testing.T, code int, rep drift.Report, stderr string) {
	t.Helper()
	worst, which, _, all := fidelityOf(rep, nil, 0, ev.Target)
	t.Logf("%s: check exit %d %v; largest RawUsage difference %.3f%% (%s) among associations at %g%% of root or more",
		ev.Name, code, rep.Summary.Counts, 100*worst, which, 100*ev.MinShare)
	t.Logf("%s: computed-reported per association: %s", ev.Name, strings.Join(all, ", "))
	for _, l := range siteFlagged(rep) {
		t.Logf("%s: %s", ev.Name, l)
	}
	if s := strings.TrimSpace(stderr); s != "" {
		t.Logf("%s: check's stderr: %s", ev.Name, s)
	}
	if code != 0 {
		t.Errorf("%s: check exited %d, want 0 (no drift on a healthy cluster)", ev.Name, code)
	}
	if !ev.Idle {
		return
	}
	root := reportedRoot(rep)
	for _, e := range rep.Associations {
		if e.User == "" || e.Reported == nil || e.Computed == nil || float64(e.Reported.RawUsage) < ev.MinShare*root {
			continue
		}
		r := float64(e.Reported.RawUsage)
		if rel := math.Abs(float64(e.Computed.RawUsage)-r) / r; rel > ev.Target {
			t.Errorf("%s: %s/%s/%s RawUsage rebuilt %v, slurmctld %v: %.3f%% off (target %g%%)",
				ev.Name, e.Account, e.User, e.Partition, e.Computed.RawUsage, e.Reported.RawUsage, 100*rel, 100*ev.Target)
		}
	}
}

// siteFlagged describes what check flagged in rep or noted: each
// association not ok or with notes (its drift and what was allowed), the
// report's note, and the billing check's partitions.
func siteFlagged(rep drift.Report) []string {
	var out []string
	if rep.Note != "" {
		out = append(out, "note: "+rep.Note)
	}
	for _, e := range rep.Associations {
		if e.Status == drift.StatusOK && len(e.Notes) == 0 {
			continue
		}
		var d, allowed string
		if e.Drift != nil {
			d = fmt.Sprint(e.Drift.RawUsage)
		}
		if e.Allowed != nil {
			allowed = fmt.Sprint(e.Allowed.RawUsage)
		}
		out = append(out, fmt.Sprintf("flagged %s/%s/%s: status %s, RawUsage drift %s allowed %s; notes %q", e.Account, e.User, e.Partition, e.Status, d, allowed, e.Notes))
	}
	for _, b := range rep.Billing {
		line := fmt.Sprintf("billing %s: %d jobs, %d mismatched, recorded %g, expected %g", b.Partition, b.Jobs, b.Mismatched, b.Recorded, b.Expected)
		if b.Example != nil {
			line += fmt.Sprintf(" (e.g. job %d recorded %g, expected %g)", b.Example.Job, b.Example.Recorded, b.Example.Expected)
		}
		out = append(out, line)
	}
	return out
}

// siteConfig is the site-shaped cluster, its local hour at hourAt.
func siteConfig(hourAt time.Time) slurmharness.Config {
	return slurmharness.Config{
		Enforce:  "associations,limits,qos,safe",
		HalfLife: "0-01:00:00",
		Nodes:    2, CPUs: 64, RealMemory: 262144, GPUs: 4,
		SelectTypeParameters: "CR_Core_Memory", DefMemPerCPU: 2048,
		Partitions: []string{
			`cpu TRESBillingWeights="CPU=1.0,Mem=0.25G"`,
			`gpu TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=16.0"`,
			"debug PriorityJobFactor=10",
		},
		Priority: []string{"PriorityWeightFairshare=100000", "PriorityWeightAge=1000", "PriorityWeightPartition=1000", "PriorityWeightQOS=1000",
			"PriorityWeightJobSize=2000", "PriorityWeightTRES=CPU=2000,Mem=500,GRES/gpu=3000"},
		// DebugFlags=Priority: slurmctld logs each job's charge at each
		// pass (slurmctld.log), what it billed beside what slurmdbd stored
		Extra:  []string{"PreemptType=preempt/qos", "PreemptMode=REQUEUE", "JobRequeue=1", "DebugFlags=Priority"},
		HourAt: hourAt,
	}
}

// loadSiteTree creates the QOS, the Unix users and the account tree:
//
//	root
//	├── science 60
//	│   ├── phys 40: alice 1, bob 2
//	│   └── chem parent: carol 1, dave 1
//	└── eng 40
//	    └── ml 10: alice 1
//	        └── nlp 10: erin 1 (partition gpu only)
//
// and gives every user QOS high and scavenger beside normal.
func loadSiteTree(c *slurmharness.Cluster) {
	users := []string{"alice", "bob", "carol", "dave", "erin"}
	for _, u := range users {
		c.EnsureUnixUser(u)
	}
	c.Sacctmgr("add", "qos", "scavenger", "UsageFactor=0", "Priority=0")
	c.Sacctmgr("add", "qos", "high", "UsageFactor=2", "Preempt=scavenger", "Priority=100")
	c.LoadTree([][]string{
		{"add", "account", "science", "parent=root", "fairshare=60"},
		{"add", "account", "phys", "parent=science", "fairshare=40"},
		{"add", "account", "chem", "parent=science", "fairshare=parent"},
		{"add", "account", "eng", "parent=root", "fairshare=40"},
		{"add", "account", "ml", "parent=eng", "fairshare=10"},
		{"add", "account", "nlp", "parent=ml", "fairshare=10"},
		{"add", "user", "alice", "account=phys", "fairshare=1"},
		{"add", "user", "bob", "account=phys", "fairshare=2"},
		{"add", "user", "carol", "account=chem", "fairshare=1"},
		{"add", "user", "dave", "account=chem", "fairshare=1"},
		{"add", "user", "alice", "account=ml", "fairshare=1"},
		{"add", "user", "erin", "account=nlp", "partition=gpu", "fairshare=1"},
	})
	c.Sacctmgr("modify", "user", "where", "name="+strings.Join(users, ","), "cluster="+c.Name, "set", "qos+=high,scavenger")
	c.WaitUsers([]string{"phys", "chem", "ml", "nlp"}, users...)
}

// siteJob is one job of the workload: its billing in slurmctld (before
// truncation) is in the comment beside it.
type siteJob struct {
	name, user, account, partition, qos string
	cpus                                int
	extra                               []string
}

// siteJobs submits the workload; long is how long the jobs that run
// across the rollup sleep. It returns each job's id by name.
func siteJobs(c *slurmharness.Cluster, long int) map[string]string {
	jobs := []struct {
		siteJob
		secs int
	}{
		{siteJob{"alice-cpu", "alice", "phys", "cpu", "normal", 6, []string{"--mem=6G"}}, long},                     // 6 + 1.5 = 7.5
		{siteJob{"bob-cpu-high", "bob", "phys", "cpu", "high", 10, []string{"--mem=3G"}}, long},                     // 10.75, ×2
		{siteJob{"carol-gpu", "carol", "chem", "gpu", "normal", 2, []string{"--mem=3G", "--gres=gpu:1"}}, long},     // 18.75
		{siteJob{"dave-debug-scav", "dave", "chem", "debug", "scavenger", 4, []string{"--mem=2G"}}, long},           // 4, ×0
		{siteJob{"erin-gpu-high", "erin", "nlp", "gpu", "high", 3, []string{"--mem=5G", "--gres=gpu:2"}}, long},     // 36.25, ×2
		{siteJob{"alice-ml-array", "alice", "ml", "cpu", "normal", 1, []string{"--mem=1500M", "--array=0-2"}}, 150}, // 1.366 each
		{siteJob{"bob-cancelled", "bob", "phys", "cpu", "normal", 5, []string{"--mem=5G"}}, long},                   // 6.25
		{siteJob{"carol-timelimit", "carol", "chem", "cpu", "normal", 3, []string{"--mem=2G", "--time=2"}}, 3600},   // 3.5
		{siteJob{"dave-suspended", "dave", "chem", "cpu", "normal", 4, []string{"--mem=3G"}}, long},                 // 4.75
		{siteJob{"bob-requeued", "bob", "phys", "gpu", "normal", 1, []string{"--mem=2G", "--gres=gpu:1"}}, 240},     // 17.5
		{siteJob{"carol-cpu-scav", "carol", "chem", "cpu", "scavenger", 2, []string{"--mem=1G"}}, long},             // 2.25, ×0
		{siteJob{"bob-debug-high", "bob", "phys", "debug", "high", 2, []string{"--mem=1G"}}, long},                  // 2, ×2
		{siteJob{"alice-ml-debug", "alice", "ml", "debug", "normal", 3, nil}, long},
		// most of n2, for bob-preemptor to preempt, 8 CPUs left for the
		// small jobs and alice-het's second component (-w alone only
		// asks that the job include n2)
		{siteJob{"carol-preempted", "carol", "chem", "cpu", "scavenger", 56, []string{"--mem=56G", "-N", "1", "-w", "n2"}}, 240}, // 70, ×0
	}
	ids := map[string]string{}
	for _, j := range jobs {
		ids[j.name] = c.Submit(j.user, j.account, j.partition, j.cpus, j.secs, append([]string{"--qos=" + j.qos}, j.extra...)...)
	}
	// heterogeneous: a component in cpu (2.75), one in gpu (17.25), on
	// either node. Placed: the jobs above hold n1's GPUs, and backfill
	// put the first component on n2 (the tighter fit), then killed and
	// requeued the job ("hetjob start failure") for want of a GPU on n1.
	out := c.MustRun("sbatch", "--parsable", "--uid=alice", "-A", "phys", "-J", "alice-het", "--chdir=/tmp", "-o", "/dev/null",
		"-p", "cpu", "-n", "2", "--mem=3G", "--qos=normal", "-N", "1", "-w", "n1", ":", "-p", "gpu", "-n", "1", "--mem=1G", "--gres=gpu:1", "--qos=normal", "-N", "1", "-w", "n2",
		fmt.Sprintf("--wrap=sleep %d", long-120))
	ids["alice-het"] = strings.TrimSpace(out)
	return ids
}

// siteRun is one live run of the site-shaped cluster: what it did to its
// jobs so far, and where it records.
type siteRun struct {
	t      *testing.T
	c      *slurmharness.Cluster
	inputs []string // the database and slurm.conf, as explain reads them
	db     []string // check's database-mode flags
	run    string   // the run's recordings
	replay *replayer
	done   []string
	// waiting are the pending jobs (id: what) and sprio the lines sprio
	// gave right after the decay pass of ran (unix seconds), while
	// capturing the pending moment
	waiting map[string]string
	sprio   string
	ran     int64
}

// did notes what the run did to the jobs, with the time, for event.json.
func (s *siteRun) did(format string, args ...any) {
	what := time.Now().In(s.c.Location()).Format(time.TimeOnly) + " " + fmt.Sprintf(format, args...)
	s.t.Log(what)
	s.done = append(s.done, what)
}

func siteShaped(t *testing.T, release string) {
	// slurmdbd's hourly rollup 13 minutes in: the jobs start 2 to 5
	// minutes in (a loaded host schedules slowly), the long ones end 4
	// minutes after it
	hourAt := time.Now().Add(13 * time.Minute).Truncate(time.Minute)
	cfg := siteConfig(hourAt)
	cfg.Release = release
	c := slurmharness.Start(t, cfg)
	loadSiteTree(c)
	s := &siteRun{t: t, c: c, run: filepath.Join(recordings, "site", release), replay: replayerOn(c.DB),
		inputs: []string{"--dsn-file", readerDSNFile(t, c), "--slurm-conf", c.Conf}}
	s.db = append(slices.Clip(s.inputs), "--slurm.state-dir", c.StateDir(), "--slurmctld.pid-file", c.PidFile())
	if recording() {
		startRun(t, s.run)
	}
	soak := startWatch(t, c, s.db)
	ids := siteJobs(c, int(time.Until(hourAt.Add(4*time.Minute)).Seconds()))
	var submitted []string
	for name, id := range ids {
		submitted = append(submitted, name+"="+id)
	}
	slices.Sort(submitted)
	s.did("submitted %s", strings.Join(submitted, " "))
	var single []string
	for name, id := range ids {
		switch {
		case strings.Contains(name, "het"):
			single = append(single, id+"+0", id+"+1")
		case !strings.Contains(name, "array") && name != "carol-timelimit":
			// carol-timelimit may run out its 2 minutes before the
			// last job starts
			single = append(single, id)
		}
	}
	s.waitRunning(5*time.Minute, single...)
	c.MustRun("scontrol", "suspend", ids["dave-suspended"])
	s.did("suspended dave-suspended (%s)", ids["dave-suspended"])
	s.pending()
	s.events(ids, hourAt)
	s.capture("loaded", false)

	c.WaitHourlyRollup(hourAt, time.Until(hourAt)+5*time.Minute)
	s.did("slurmdbd rolled up the hour to %v", hourAt.In(c.Location()).Format(time.TimeOnly))
	c.WaitDecayPass()
	s.capture("rollup", false)

	c.WaitGone(15 * time.Minute)
	s.did("every job ended")
	c.WaitDecayPass()
	c.WaitDecayPass()
	s.capture("idle", true)
	soak.alerts(t, "idle")
	s.maxTRES()
	soak.end(t)
	siteLogDatabase(t, c)
}

// pending submits jobs that cannot start (both nodes whole; four GPUs on
// one node; two partitions at once), captures the moment with sprio read
// right after a decay pass, and cancels them.
func (s *siteRun) pending() {
	c := s.c
	s.waiting = map[string]string{}
	for _, j := range []siteJob{
		{"alice-whole-node", "alice", "phys", "cpu", "normal", 128, nil},
		{"erin-four-gpus", "erin", "nlp", "gpu", "normal", 1, []string{"--mem=1G", "--gres=gpu:4", "-N", "1"}},
		{"dave-whole-scav", "dave", "chem", "debug", "scavenger", 128, nil},
		{"bob-two-partitions", "bob", "phys", "cpu,debug", "normal", 128, nil},
	} {
		id := c.Submit(j.user, j.account, j.partition, j.cpus, 60, append([]string{"--qos=" + j.qos}, j.extra...)...)
		s.waiting[id] = fmt.Sprintf("%s %s %s %s", j.name, j.account, j.partition, j.qos)
		s.did("submitted %s (%s), pending", j.name, id)
	}
	c.WaitDecayPass()
	s.sprio = c.MustRun("sprio", "-h", "-o", sprioFormat)
	ran, _, err := slurmstate.LastDecayRan(c.StateDir())
	if err != nil {
		s.t.Fatal(err)
	}
	s.ran = ran.Unix()
	s.capture("pending", false)
	s.sprio, s.ran = "", 0
	for id, what := range s.waiting {
		c.MustRun("scancel", id)
		s.did("cancelled %s (%s) pending", what, id)
	}
	s.waiting = nil
}

// events goes through what production jobs do (a cancel while running, a
// requeue, a preemption, a time-limit kill, a resume) and waits for a
// pass before the hourly rollup at hourAt.
func (s *siteRun) events(ids map[string]string, hourAt time.Time) {
	c := s.c
	c.MustRun("scancel", ids["bob-cancelled"])
	s.did("cancelled bob-cancelled (%s) running", ids["bob-cancelled"])
	c.MustRun("scontrol", "requeue", ids["bob-requeued"])
	s.did("requeued bob-requeued (%s)", ids["bob-requeued"])
	// room on n2 only if carol-preempted goes: slurmctld requeues it
	// more than the 8 CPUs carol-preempted leaves on n2
	pre := c.Submit("bob", "phys", "cpu", 12, 180, "--qos=high", "--mem=4G", "-N", "1", "-w", "n2") // 13, ×2
	s.waitRunning(3*time.Minute, pre)
	s.did("bob-preemptor (%s) running on n2; carol-preempted (%s) %s", pre, ids["carol-preempted"], c.JobStates()[ids["carol-preempted"]])
	c.WaitGone(5*time.Minute, ids["carol-timelimit"])
	s.did("carol-timelimit (%s) ended (TIMEOUT at --time=2)", ids["carol-timelimit"])
	c.MustRun("scontrol", "resume", ids["dave-suspended"])
	s.did("resumed dave-suspended (%s)", ids["dave-suspended"])
	c.WaitDecayPass()
	if time.Until(hourAt) < c.CalcPeriod()/2+30*time.Second {
		s.t.Errorf("the events took until %v, the hourly rollup is at %v: loaded is not before the rollup", time.Now().Format(time.TimeOnly), hourAt.Format(time.TimeOnly))
	}
}

// waitRunning waits until the jobs run, for at most d; if they do not, it
// fails the test with squeue's jobs and their reasons.
func (s *siteRun) waitRunning(d time.Duration, ids ...string) {
	s.t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(2 * time.Second) {
		st, waiting := s.c.JobStates(), ""
		for _, id := range ids {
			if st[id] != "RUNNING" {
				waiting = fmt.Sprintf("job %s is %q", id, st[id])
				break
			}
		}
		if waiting == "" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("waited %v for jobs to run: %s; squeue:\n%s", d, waiting, strings.Join(siteSqueue(s.c), "\n"))
		}
	}
}

// maxTRES restarts slurmctld with PriorityFlags=MAX_TRES and captures
// jobs billed under it: the largest of a node's weighted TRES, fractional
// where memory or GPUs weigh most.
func (s *siteRun) maxTRES() {
	c := s.c
	saved := c.RestartCtld("MAX_TRES")
	s.did("restarted slurmctld with PriorityFlags=MAX_TRES (state saved on the way out: %v)", saved)
	var ids []string
	for _, j := range []siteJob{
		{"alice-mem", "alice", "phys", "cpu", "normal", 2, []string{"--mem=10G"}},                    // max(2, 2.5) = 2.5
		{"carol-gpu-max", "carol", "chem", "gpu", "normal", 4, []string{"--mem=2G", "--gres=gpu:1"}}, // max(4, 0.5, 16) = 16
		{"erin-gpu-max", "erin", "nlp", "gpu", "high", 1, []string{"--mem=3G", "--gres=gpu:1"}},      // 16, ×2
		{"bob-mem-high", "bob", "phys", "cpu", "high", 1, []string{"--mem=7G"}},                      // 1.75, ×2
	} {
		id := c.Submit(j.user, j.account, j.partition, j.cpus, 240, append([]string{"--qos=" + j.qos}, j.extra...)...)
		ids = append(ids, id)
		s.did("submitted %s (%s)", j.name, id)
	}
	s.waitRunning(3*time.Minute, ids...)
	c.WaitDecayPass()
	c.WaitDecayPass()
	s.capture("max_tres", false)
}

// capture judges the moment (check in database mode, as the exporter
// reads a live cluster) and, when recording, records it first (the
// recording does not depend on the verdict) and judges its replay too.
// Callers come right after a decay pass: the read waits half a period, as
// serve reads clear of slurmctld's passes (a read a pass may fall in is
// judged on either side of it, which the histories' recordings cover).
func (s *siteRun) capture(name string, idle bool) {
	t, c := s.t, s.c
	t.Helper()
	time.Sleep(c.CalcPeriod() / 2)
	ev := siteEvent{Name: name, Idle: idle, Target: 0.005, MinShare: 0.01, Done: append([]string(nil), s.done...), Jobs: siteSqueue(c),
		Pending: s.waiting, SprioRan: s.ran}
	if ran, err := c.HourlyRollup(); err == nil {
		ev.HourlyRollup = ran.Unix()
	}
	code, rep, stderr := checkJSON(t, c.Env(), s.db...)
	if recording() {
		dir := filepath.Join(s.run, name)
		recordEvent(t, c, dir, ev)
		if s.sprio != "" {
			if err := os.WriteFile(filepath.Join(dir, sprioFile), []byte(s.sprio), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rcode, replayed, rstderr := s.replay.check(t, dir)
		worst, which := computedApart(rep, replayed)
		t.Logf("%s: recorded in %s; the replay computes within %.4f%% of root's usage of the live check (%s); the replay judged:", name, dir, 100*worst, which)
		ev.judge(t, rcode, replayed, rstderr)
	}
	t.Logf("%s: the live check judged:", name)
	ev.judge(t, code, rep, stderr)
	if s.sprio != "" {
		explain := func(args ...string) (int, string, string) {
			return runExporterEnv(t, c.Env(), append(append([]string{"explain"}, args...), s.inputs...)...)
		}
		ev.judgeSprio(t, explain, s.sprio, c.Sshare("-a", "-l", "-P"))
	}
}

// siteSqueue is squeue's jobs: id, state, partition, QOS, user, account,
// CPUs, memory, GRES, reason.
func siteSqueue(c *slurmharness.Cluster) []string {
	out, err := c.Run("squeue", "-h", "-o", "%i|%T|%P|%q|%u|%a|%C|%m|%b|%r")
	if err != nil {
		return []string{err.Error()}
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// siteLogDatabase logs what slurmdbd stored of the jobs (billing in
// tres_alloc, time_suspended, a requeued job's rows) and of the rolled-up
// hour, for the reader of the run.
func siteLogDatabase(t *testing.T, c *slurmharness.Cluster) {
	t.Helper()
	for _, q := range []string{
		"SELECT id_job, id_array_job, id_array_task, job_name, state, id_qos, `partition`, time_submit, time_eligible, time_start, time_end, time_suspended, tres_alloc, tres_req FROM slurm_acct_db.`%s_job_table` ORDER BY job_db_inx",
		"SELECT * FROM slurm_acct_db.`%s_suspend_table`",
		"SELECT id, name, usage_factor FROM slurm_acct_db.qos_table",
		"SELECT id, type, name FROM slurm_acct_db.tres_table",
		"SELECT id, id_tres, time_start, alloc_secs FROM slurm_acct_db.`%s_assoc_usage_hour_table` ORDER BY time_start, id, id_tres",
	} {
		if strings.Contains(q, "%s") {
			q = fmt.Sprintf(q, c.Name)
		}
		out, err := c.SQL(q)
		t.Logf("%s:\n%s%v", q, out, err)
	}
}

// TestDatabaseAtReplay: a dump taken RecordDelay after the report was
// read holds every end slurmctld had charged by then, so check
// --database-at gives unrecorded ends no part of the bound; without it, or
// with a dump taken sooner, the part stays. On the first recorded capture
// under limits with jobs running whose read no pass may have fallen in
// (one that may have is judged on either side of the pass, against the
// ends since each side's moment).
func TestDatabaseAtReplay(t *testing.T) {
	t.Parallel()
	r := newReplayer(t)
	unrecorded := func(l loaded, args ...string) (sum float64, note string) {
		t.Helper()
		code, rep, stderr := l.check(t, "", args...)
		if code > 1 {
			t.Fatalf("check %v: exit %d: %s", args, code, stderr)
		}
		for _, e := range rep.Associations {
			if e.BoundParts != nil {
				sum += e.BoundParts.Unrecorded
			}
		}
		return sum, rep.Note
	}
	for _, dir := range recorded(t, "history") {
		l := r.load(t, dir)
		if l.moment.Dumped > 0 {
			continue // dumped RecordDelay after: no part to begin with
		}
		if sum, note := unrecorded(l); sum == 0 || strings.Contains(note, "decay pass of") {
			continue
		}
		end := l.moment.Read[1]
		if got, _ := unrecorded(l, "--database-at", fmt.Sprintf("%.6f", end+1)); got == 0 {
			t.Errorf("%s dumped 1 s after the read: no part for unrecorded ends", dir)
		}
		if got, _ := unrecorded(l, "--database-at", fmt.Sprintf("%.6f", end+3.1)); got != 0 {
			t.Errorf("%s dumped 3.1 s after the read: unrecorded_ends %v, want 0", dir, got)
		}
		return
	}
	t.Fatal("no recorded capture with unrecorded ends clear of a pass")
}
