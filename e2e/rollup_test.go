package e2e

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// TestRealSlurmRollup checks the rollup path against real Slurm (22.05;
// $SLURMDBD_EXPORTER_RELEASES for others):
// jobs run and end, slurmdbd's own hourly rollup rolls their hour up (the
// cluster's zone starts a local hour minutes after they start:
// Config.HourAt), one job runs on across it, and check's database mode,
// reading the usage before the rollup from the hour rows and the rest
// from the jobs, must give slurmctld's RawUsage. With a 1000-day
// half-life (decay below 1e-5 over the test; a half-life of 0 would need
// a reset period, whose cut falls inside the rolled hour) and
// AccountingStorageEnforce=limits (finished jobs charged to their end)
// that is exact up to sshare's truncation to an integer.
func TestRealSlurmRollup(t *testing.T) {
	t.Parallel()
	for _, release := range liveReleases() {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			realSlurmRollup(t, release)
		})
	}
}

// TestRollupReplay judges every recorded rollup run (make record) as
// TestRealSlurmRollup judged it live.
func TestRollupReplay(t *testing.T) {
	t.Parallel()
	eachCapture(t, "rollup", judgeRollup)
}

func realSlurmRollup(t *testing.T, release string) {
	// the jobs below end within 3 minutes of the cluster's start
	hour := time.Now().Add(4 * time.Minute).Truncate(time.Minute)
	c := slurmharness.Start(t, slurmharness.Config{Release: release, CPUs: 1024, HalfLife: "1000-0", Enforce: "associations,limits", HourAt: hour})
	loadTwoAccounts(c, "dave")
	var ids []string
	for _, j := range []struct {
		user, account string
		cpus, secs    int
	}{{"alice", "phys", 256, 100}, {"bob", "phys", 96, 75}, {"carol", "chem", 320, 130}} {
		ids = append(ids, c.Submit(j.user, j.account, "", j.cpus, j.secs))
	}
	// its seconds before the rollup come from the row, after it from the job
	across := c.Submit("dave", "chem", "", 128, int(time.Until(hour).Seconds())+150)
	c.WaitRunning(3*time.Minute, append(ids, across)...)
	c.WaitGone(5*time.Minute, ids...)
	c.WaitHourlyRollup(hour, time.Until(hour)+2*time.Minute)
	c.WaitDecayPass()
	rows, err := c.SQL(fmt.Sprintf("SELECT COUNT(DISTINCT id) FROM slurm_acct_db.`%s_assoc_usage_hour_table` WHERE id_tres = 5 AND time_start = %d AND alloc_secs > 0", c.Name, hour.Add(-time.Hour).Unix()))
	if err != nil || rows != "4\n" {
		t.Fatalf("the rollup at %v wrote billing rows for %q associations (%v), want the 4 users'", hour.Format(time.TimeOnly), rows, err)
	}
	code, rep, stderr := checkJSON(t, c.Env(), "--dsn-file", readerDSNFile(t, c), "--slurm-conf", c.Conf, "--slurm.state-dir", c.StateDir())
	judgeRollup(t, code, rep, stderr)
	if recording() {
		run := filepath.Join(recordings, "rollup", release)
		startRun(t, run)
		dir := filepath.Join(run, "01")
		recordEvent(t, c, dir, struct{}{})
		code, rep, stderr = replayerOn(c.DB).check(t, dir)
		judgeRollup(t, code, rep, stderr)
	}
}

// judgeRollup fails t where check's report after the rollup is not
// slurmctld's usage.
func judgeRollup(t *testing.T, code int, rep drift.Report, stderr string) {
	t.Helper()
	t.Logf("rollup path: %+v, largest drift %s", rep.Summary.Counts, rep.Summary.MaxDrift.String())
	if code != 0 {
		t.Errorf("check exited %d: %s", code, stderr)
	}
	charged := 0
	for _, e := range rep.Associations {
		if e.Reported == nil || e.Computed == nil {
			t.Errorf("%s/%s: %s", e.Account, e.User, e.Status)
			continue
		}
		if float64(e.Reported.RawUsage) > 0 {
			charged++
		}
		// sshare truncates to an integer; decay over the minutes of the
		// test, spread evenly or not over the hour, stays below 1e-5.
		if d := math.Abs(float64(e.Drift.RawUsage)); d > 1+1e-5*float64(e.Reported.RawUsage) {
			t.Errorf("%s/%s: RawUsage from the rollups %v, slurmctld %v", e.Account, e.User, e.Computed.RawUsage, e.Reported.RawUsage)
		}
	}
	if charged < 4 {
		t.Errorf("only %d associations have usage: the jobs did not run as planned", charged)
	}
}
