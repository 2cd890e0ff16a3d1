package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// TestRealSlurmRollup checks the rollup path against real Slurm 22.05: jobs
// run, real slurmdbd rolls their hour up on demand (sacctmgr -i rollup,
// which leaves last_ran alone, so the test records the rollup there as the
// hourly rollup would), and check's database mode, reading the usage from
// the rollup tables, must give slurmctld's RawUsage. With
// a 1000-day half-life (decay below 1e-5 over the test; a half-life of 0
// would need a reset period, whose cut falls inside the rolled hour) and
// AccountingStorageEnforce=limits (finished jobs charged to their end)
// that is exact up to sshare's truncation to an integer.
func TestRealSlurmRollup(t *testing.T) {
	c := slurmharness.Start(t, slurmharness.Config{CPUs: 1024, HalfLife: "1000-0", Enforce: "associations,limits"})
	loadTwoAccounts(c)
	first := time.Now()
	var ids []string
	for i, j := range []struct {
		user, account string
		cpus, secs    int
	}{{"alice", "phys", 256, 100}, {"bob", "phys", 96, 75}, {"carol", "chem", 320, 130}} {
		ids = append(ids, c.Submit(j.user, j.account, "", j.cpus, j.secs))
		_ = i
	}
	c.WaitRunning(3*time.Minute, ids...)
	c.WaitGone(5*time.Minute, ids...)
	c.WaitDecayPass()
	ran, _, err := slurmstate.LastDecayRan(c.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	from := first.Truncate(time.Hour)
	to := time.Now().Truncate(time.Hour).Add(time.Hour)
	c.MustRun("sacctmgr", "-i", "rollup", from.Format("2006-01-02T15:04:05"), to.Format("2006-01-02T15:04:05"))
	rows, err := c.SQL(fmt.Sprintf("SELECT COUNT(*) FROM slurm_acct_db.`%s_assoc_usage_hour_table` WHERE id_tres = 5", c.Name))
	if err != nil || rows == "0\n" {
		t.Fatalf("rollup wrote no billing rows: %q %v", rows, err)
	}
	// What the hourly rollup records when it has rolled up to ran: the
	// exporter then reads usage up to there from the rollups, not the jobs.
	if _, err := c.SQL(fmt.Sprintf("INSERT INTO slurm_acct_db.`%s_last_ran_table` VALUES (%d, %d, %d)", c.Name, ran.Unix(), ran.Unix(), ran.Unix())); err != nil {
		t.Fatal(err)
	}
	code, rep, stderr := runDatabaseCheck(t, c)
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
