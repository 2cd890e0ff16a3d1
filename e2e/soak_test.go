package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// soakEnv sets how long TestServeRealSlurm's healthy workload runs: 10
// minutes by default and under make test-live, 6 under make test, 60
// under make soak. At least 5: serve pins the pass phase in about two
// periods, and the restart at three fifths hides it until serve shows a
// report read after it (soakWorkload.phaseComparable); a 3-minute soak
// inferred it at no scrape it could be judged at.
const soakEnv = "SLURMDBD_EXPORTER_SOAK"

func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv(soakEnv)
	if v == "" {
		return 10 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 5*time.Minute {
		t.Fatalf("%s=%q: expected a duration of at least 5m", soakEnv, v)
	}
	return d
}

// hiddenStateDir is an empty directory given to the exporter as
// StateSaveLocation: the phase of slurmctld's decay passes is then unknown
// to it, as off the head node, for other clusters, or where the state
// directory is not readable; it must infer it from what Slurm reports.
func hiddenStateDir(t *testing.T) string {
	t.Helper()
	return t.TempDir()
}

// soakStats gathers what a soak prints: drift and its bound per kind and
// value at every scrape, and the inferred pass phase's error against the
// state file's.
type soakStats struct {
	drift, bound map[string][]float64
	phaseErr     []float64
	uncertainty  []float64
	understated  []string // scrapes whose phase error exceeds the stated uncertainty
	scrapes      int
}

// record reads one scrape of cluster; truth is slurmctld's last pass from
// its state file, period PriorityCalcPeriod.
func (st *soakStats) record(m map[string]float64, cluster string, truth time.Time, period time.Duration) {
	if st.drift == nil {
		st.drift, st.bound = map[string][]float64{}, map[string][]float64{}
	}
	st.scrapes++
	for k, v := range m {
		if !strings.Contains(k, `slurm_cluster="`+cluster+`"`) {
			continue
		}
		if rest, ok := strings.CutPrefix(k, "slurmdbd_fairshare_drift_max"); ok {
			st.drift[rest] = append(st.drift[rest], v)
		}
		if rest, ok := strings.CutPrefix(k, "slurmdbd_fairshare_drift_bound"); ok {
			st.bound[rest] = append(st.bound[rest], v)
		}
	}
	last, ok := m[series("slurmdbd_fairshare_decay_last_pass_timestamp_seconds", "slurm_cluster", cluster, "source", "inferred")]
	if !ok || truth.IsZero() {
		return
	}
	p := period.Seconds()
	e := math.Mod(math.Abs(last-float64(truth.Unix())), p)
	e = math.Min(e, p-e)
	u := m[series("slurmdbd_fairshare_decay_phase_uncertainty_seconds", "slurm_cluster", cluster, "source", "inferred")]
	st.phaseErr = append(st.phaseErr, e)
	st.uncertainty = append(st.uncertainty, u)
	// the state file holds whole seconds
	if e > u+1 {
		st.understated = append(st.understated, fmt.Sprintf("%s: inferred pass %.0f, state file %d: %.0f s off, stated ±%.1f s",
			time.Now().Format(time.TimeOnly), last, truth.Unix(), e, u))
	}
}

// report logs the percentiles make soak prints.
func (st *soakStats) report(t *testing.T) {
	t.Helper()
	t.Logf("soak: %d scrapes", st.scrapes)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range st.drift {
			if !yield(k) {
				return
			}
		}
	}) {
		if !strings.Contains(k, `kind="usage"`) {
			continue
		}
		t.Logf("soak: drift %s p50 %s p99 %s max %s; bound p50 %s max %s", k, pct(st.drift[k], 50), pct(st.drift[k], 99), pct(st.drift[k], 100),
			pct(st.bound[k], 50), pct(st.bound[k], 100))
	}
	t.Logf("soak: inferred pass phase against the state file's, %d scrapes: error p50 %s p99 %s max %s s; stated uncertainty p50 %s max %s s",
		len(st.phaseErr), pct(st.phaseErr, 50), pct(st.phaseErr, 99), pct(st.phaseErr, 100), pct(st.uncertainty, 50), pct(st.uncertainty, 100))
}

// pct is the p-th percentile of v (nearest rank), "-" when empty.
func pct(v []float64, p float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return fmt.Sprintf("%.4g", s[max(i, 0)])
}

// soakWorkload is the healthy mixed workload of a soak on a 1024-CPU node
// with a 1-minute PriorityCalcPeriod: a job wider than half the cluster
// and a long narrow one all along, short jobs that end inside one pass and
// jobs that end across one every 45 s, two jobs pending behind them
// (explain --job against sprio), an on-demand rollup of the last hour and
// a slurmctld restart with its state kept. The cluster's hourly rollup
// falls before both (Config.HourAt): slurmctld, restarted, sends the ends
// of jobs it still holds again, and slurmdbd rewinds last_ran to one from
// before the rollup (as_mysql_job.c), inside the rolled hour.
type soakWorkload struct {
	c                 *slurmharness.Cluster
	start             time.Time
	duration          time.Duration
	nextJobs          time.Time
	rolledUp, restart bool
	// Restarted is when slurmctld was restarted (zero: not yet).
	Restarted time.Time
	// rewound is the late record's time slurmdbd rewound last_ran to
	// after the restart (zero: none seen).
	rewound time.Time
	// reportedBack is when a scrape first showed a report read after the
	// restart (zero: not yet).
	reportedBack time.Time
	// Lost: slurmctld saved no state as it stopped (a lock was held,
	// slurmharness.savedState) and came back with its last checkpoint's
	// usage. What it lost is then a real fault, rightly flagged.
	Lost    bool
	Pending []string
}

func startSoakWorkload(c *slurmharness.Cluster, d time.Duration) *soakWorkload {
	w := &soakWorkload{c: c, start: time.Now(), duration: d}
	secs := int(d.Seconds()) + 300
	c.Submit("alice", "phys", "", 600, secs)
	c.Submit("carol", "chem", "", 128, secs)
	// 296 CPUs free: these wait
	w.Pending = []string{c.Submit("alice", "phys", "", 900, 60), c.Submit("carol", "chem", "", 500, 60)}
	return w
}

// step submits what is due and runs the events that are.
func (w *soakWorkload) step(t *testing.T) {
	t.Helper()
	now := time.Now()
	if !now.Before(w.nextJobs) {
		w.c.Submit("bob", "phys", "", 96, 20)   // ends inside one pass
		w.c.Submit("dave", "chem", "", 64, 75)  // ends across a pass
		w.c.Submit("bob", "phys", "p2", 16, 40) // another partition
		w.nextJobs = now.Add(45 * time.Second)
	}
	if el := now.Sub(w.start); !w.rolledUp && el > w.duration*2/5 {
		w.rolledUp = true
		// sacctmgr reads local times: the cluster's hours
		loc := w.c.Location()
		lt := now.In(loc)
		to := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), 0, 0, 0, loc)
		w.c.MustRun("sacctmgr", "-i", "rollup", to.Add(-time.Hour).Format("2006-01-02T15:04:05"), to.Format("2006-01-02T15:04:05"))
		t.Logf("soak: sacctmgr rollup at %s of the hour to %s", now.Format(time.TimeOnly), to.Format(time.TimeOnly+" MST"))
	}
	if el := now.Sub(w.start); !w.restart && el > w.duration*3/5 {
		w.restart = true
		w.Lost = !w.c.RestartCtld("")
		w.Restarted = time.Now()
		t.Logf("soak: slurmctld restarted at %s, its state lost: %v", w.Restarted.Format(time.TimeOnly), w.Lost)
	}
	if !w.Restarted.IsZero() && w.rewound.IsZero() {
		if ran, err := w.c.HourlyRollup(); err == nil && ran.In(w.c.Location()).Format("04:05") != "00:00" {
			w.rewound = ran
			t.Logf("soak: slurmdbd rewound last_ran to %s, inside the hour it had rolled", ran.In(w.c.Location()).Format(time.TimeOnly+" MST"))
		}
	}
}

// reportedLastSuccess is when serve last read what Slurm reports (the
// middle of the read).
var reportedLastSuccess = series("slurmdbd_exporter_last_success_timestamp_seconds", "source", "reported")

// reportedTimeout is serve's default --reported.timeout: a read (boot
// time, then sshare) ends within it of its start.
const reportedTimeout = 30 * time.Second

// scraped follows serve back from the restart, scrape by scrape: it notes
// the first scrape that shows a report read after it, and fails the test
// if none has within 5 minutes (reads come about once a period).
func (w *soakWorkload) scraped(t *testing.T, m map[string]float64) {
	t.Helper()
	if w.Restarted.IsZero() || !w.reportedBack.IsZero() {
		return
	}
	if m[reportedLastSuccess] > slurmharness.UnixSeconds(w.Restarted) {
		w.reportedBack = time.Now()
		t.Logf("soak: serve shows a report read after slurmctld's restart %v after it", w.reportedBack.Sub(w.Restarted).Round(time.Second))
		return
	}
	if time.Since(w.Restarted) > 5*time.Minute {
		t.Fatalf("soak: serve shows no report read since slurmctld's restart at %s (up{reported} %v)", w.Restarted.Format(time.TimeOnly),
			m[series("slurmdbd_exporter_up", "source", "reported")])
	}
}

// restarting: slurmctld was restarted and serve shows no report read
// since, so up{reported} may be 0: a read failed while slurmctld was down,
// and the next may be a period away.
func (w *soakWorkload) restarting() bool {
	return !w.Restarted.IsZero() && w.reportedBack.IsZero()
}

// phaseComparable: the pass phase scrape m shows can be judged against the
// state file. After the restart slurmctld's passes start at a new phase,
// and serve infers it afresh from the first read that sees the new boot
// time: a report read that began after the restart, which one read more
// than reportedTimeout after it did.
func (w *soakWorkload) phaseComparable(m map[string]float64) bool {
	return w.Restarted.IsZero() || m[reportedLastSuccess] > slurmharness.UnixSeconds(w.Restarted.Add(reportedTimeout))
}

// soakExplain is what checkSprioRanges reads of explain --job.
type soakExplain struct {
	Partition     string       `json:"partition"`
	Priority      drift.Num    `json:"priority"`
	PriorityRange [2]drift.Num `json:"priority_range"`
	Factors       []struct {
		Factor     string        `json:"factor"`
		Normalized drift.Num     `json:"normalized"`
		Range      *[2]drift.Num `json:"range"`
		Weight     float64       `json:"weight"`
	} `json:"factors"`
	Phase result.Phase `json:"phase"`
}

// checkSprioRanges runs explain --job with the state hidden for each
// pending job and requires every factor and the priority sprio shows to
// lie in explain's ranges (sprio prints factors to 7 decimals and rounds
// weighted ones).
func checkSprioRanges(t *testing.T, c *slurmharness.Cluster, dsnFile, hidden string, jobs []string) {
	t.Helper()
	sprio := parseSprio(t, c.MustRun("sprio", "-h", "-o", sprioFormat))
	const print7 = 0.5e-7 + 1e-9
	compared := 0
	defer func() {
		if compared == 0 {
			t.Errorf("explain --job against sprio: no pending job compared (sprio lists %d)", len(sprio))
		}
		t.Logf("explain --job against sprio: %d job partitions, each factor and priority checked against explain's ranges", compared)
	}()
	for _, id := range jobs {
		code, out, errOut := runExporterEnv(t, c.Env(), "explain", "--job", id, "--dsn-file", dsnFile, "--slurm-conf", c.Conf, "--slurm.state-dir", hidden,
			"--reported.source", "none", "--output", "json")
		var exps []soakExplain
		if err := json.Unmarshal([]byte(out), &exps); code != 0 || err != nil {
			t.Errorf("explain --job %s: exit %d, %v\n%s\n%s", id, code, err, out, errOut)
			continue
		}
		for _, x := range exps {
			s, ok := sprio[id+"/"+x.Partition]
			if !ok {
				t.Errorf("job %s in %s: explained, not in sprio", id, x.Partition)
				continue
			}
			for _, f := range x.Factors {
				k := factorIndex(t, f.Factor)
				if k == priority.TRES {
					continue
				}
				lo, hi := f.Normalized, f.Normalized
				if f.Range != nil {
					lo, hi = f.Range[0], f.Range[1]
				}
				if v := s.norm[k]; !(v >= float64(lo)-print7 && v <= float64(hi)+print7) {
					t.Errorf("job %s in %s: sprio %s %.7f outside explain's %.7f–%.7f (%s)", id, x.Partition, f.Factor, v, float64(lo), float64(hi), x.Phase.Describe())
				}
			}
			compared++
			// sprio rounds each weighted factor it sums
			if slack := 2.0; !(s.prio >= float64(x.PriorityRange[0])-slack && s.prio <= float64(x.PriorityRange[1])+slack) {
				t.Errorf("job %s in %s: sprio priority %.0f outside explain's %.0f–%.0f (%s)", id, x.Partition, s.prio,
					float64(x.PriorityRange[0]), float64(x.PriorityRange[1]), x.Phase.Describe())
			}
		}
	}
}

// trueLastPass is slurmctld's last decay pass from its state file (zero
// while it has none).
func trueLastPass(c *slurmharness.Cluster) time.Time {
	ran, _, err := slurmstate.LastDecayRan(c.StateDir())
	if err != nil {
		return time.Time{}
	}
	return ran
}

// hiddenCheck runs check in database mode with the state hidden: it
// reads sshare across a decay pass to infer the phase, then must find
// nothing beyond the bounds.
// lost: slurmctld lost usage at a restart (soakWorkload.Lost), so drift
// is logged, not an error.
func hiddenCheck(t *testing.T, c *slurmharness.Cluster, dsnFile, hidden string, lost bool) {
	t.Helper()
	flag := t.Errorf
	if lost {
		flag = t.Logf
	}
	start := time.Now()
	// check stops reading at the first pass it pins; its default wait (one
	// period and 10 s) was nearly used up on a loaded machine (51 s)
	code, rep, stderr := checkJSON(t, c.Env(), "--dsn-file", dsnFile, "--slurm-conf", c.Conf, "--slurm.state-dir", hidden, "--phase.wait", "5m")
	phase := rep.Phase
	if phase == nil {
		phase = &result.Phase{}
	}
	t.Logf("check, state hidden, after %v: exit %d, %+v, phase %s ±%gs, largest relative RawUsage drift %.3g (bound %.3g), note %q",
		time.Since(start).Round(time.Second), code, rep.Summary.Counts, phase.Source, phase.Uncertainty.Seconds(),
		float64(rep.Summary.MaxRelative.RawUsage), float64(rep.Summary.MaxRelativeBound.RawUsage), rep.Note)
	if code != 0 {
		for _, e := range rep.Associations {
			if e.Status != drift.StatusOK {
				flag("check, state hidden: %s/%s: %s: drift %s, bound %s, allowed %s", e.Account, e.User, e.Status, e.Drift, e.Bound, e.Allowed)
			}
		}
		if rep.Formula != nil {
			for _, e := range rep.Formula.Associations {
				if e.Status == drift.StatusDrift {
					flag("check, state hidden: formula %s/%s: drift %s, allowed %s %v", e.Account, e.User, e.Drift, e.Allowed, e.Notes)
				}
			}
		}
		flag("check in database mode with the state hidden: exit %d on a healthy cluster\n%s", code, stderr)
	}
	if phase.Source != "inferred" {
		t.Errorf("check, state hidden: phase %q, want inferred (it reads sshare across a pass)", phase.Source)
	}
}
