package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// killFault: slurmctld killed (SIGKILL: a crash, the OOM killer) and
// started again. It saves assoc_usage only every PERIODIC_CHECKPOINT (300 s
// of its process) and on a clean shutdown or reconfigure, so it comes back
// with the usage of its last checkpoint: what it charged since is lost.
// With carol's and bob's jobs running (352 CPUs), the kill comes a pass
// after a checkpoint (a reconfigure's, slurmharness.Checkpoint) and after
// serve's read of that pass. serve must flag usage drift, carol's reported
// usage below the rebuilt one, within 2*PriorityCalcPeriod + 30 s of the
// restart, and the loss detector count a loss across the restart, carol's
// or bob's, by then too. Nothing is lost without jobs charged since the checkpoint: an
// older checkpoint of an idle cluster holds more usage, not less (less
// decayed), which is why dd7c065's older assoc_usage put back under a
// SIGTERM'd slurmctld, after its jobs had ended, showed nothing. It
// returns when slurmctld answered again.
func killFault(t *testing.T, c *slurmharness.Cluster, s *served) (restarted time.Time) {
	t.Helper()
	rawUsage := series("slurmdbd_fairshare_drift_beyond_tolerance_associations", "slurm_cluster", c.Name, "kind", "usage", "value", "raw_usage")
	ssh := func() []string {
		out, _ := c.Run("sshare", "-n", "-P", "-a", "-o", "Account,User,RawUsage")
		return strings.Fields(out)
	}
	// charged all along, and carol's chain, which no fault before touched,
	// loses what they were charged since the checkpoint
	jobs := []string{c.Submit("carol", "chem", "", 256, 900), c.Submit("bob", "phys", "", 96, 900)}
	defer c.Run("scancel", jobs...)
	c.WaitRunning(5*time.Minute, jobs...)
	// the checkpoint right after a pass: 22.05.8 lost only the charges of
	// the 9 s between a checkpoint and the pass after it (carol 4.3%,
	// flagged 122 s after the restart), not the pass's whole period
	c.WaitDecayPass()
	ckpt := c.Checkpoint()
	// a pass charges the jobs from the last pass before the checkpoint,
	// which the checkpoint holds; serve reads after it, so its last read
	// before the kill holds the charge the kill loses. The pass stamps its
	// whole second before it charges: a read within that second (26.05.5,
	// 2026-11-27) may show the usage before the charge, and the loss
	// detector then no fall
	c.WaitDecayPass()
	pass := trueLastPass(c)
	m, held, err := s.scrapeUntil(3*c.CalcPeriod(), 2*time.Second, func(m map[string]float64) bool { return m[reportedLastSuccess] >= float64(pass.Unix()+1) })
	if !held {
		t.Fatalf("kill: serve did not read sshare after slurmctld's pass at %v (last scrape: %v)", pass.Format(time.TimeOnly), err)
	}
	if now := c.CheckpointTime(); !now.Equal(ckpt) {
		t.Fatalf("kill: assoc_usage written at %v, not at the checkpoint waited for (%v): the kill would lose nothing", now.Format(time.TimeOnly), ckpt.Format(time.TimeOnly))
	}
	lostRestart := series(lossesTotal, "slurm_cluster", c.Name, "kind", result.LossAcrossRestart)
	lost0, beyond0 := m[lostRestart], m[rawUsage]
	killed := time.Now()
	t.Logf("kill: SIGKILL %.0f s after the assoc_usage checkpoint, %.0f s after slurmctld's last pass; raw_usage beyond tolerance %v, across_restart losses %v; sshare %q",
		killed.Sub(ckpt).Seconds(), killed.Sub(pass).Seconds(), beyond0, lost0, ssh())
	c.KillCtld()
	restarted = time.Now()
	t.Logf("kill: slurmctld answering %v after the kill; sshare %q", restarted.Sub(killed).Round(time.Second), ssh())
	// a period to slurmctld's first pass and serve's read after it, one
	// for a read that the restart's pass timing put off, and the read itself
	within := 2*c.CalcPeriod() + 30*time.Second
	// the drift is the loss: carol's reported usage below the rebuilt one
	// by more than the usage tolerance (--drift.usage-tolerance's default)
	carol := []string{"slurm_cluster", c.Name, "account", "chem", "user", "carol", "partition", "", "parent", "chem"}
	carolComputed, carolReported := series("slurmdbd_fairshare_usage_billing_seconds", carol...), series("slurmdbd_fairshare_reported_usage_billing_seconds", carol...)
	const usageTolerance = 0.005
	m, held, err = s.scrapeUntil(10*c.CalcPeriod(), 2*time.Second, func(m map[string]float64) bool {
		return m[rawUsage] > beyond0 && m[carolReported] < (1-usageTolerance)*m[carolComputed]
	})
	took := time.Since(restarted)
	_, _, which := driftBeyond(m, c.Name)
	t.Logf("kill: usage drift after %v: %v; usage (computed, reported) %v; sshare %q", took.Round(time.Second), which, usagePairs(m, c.Name), ssh())
	if !held || took > within {
		t.Errorf("slurmctld killed and restarted from its checkpoint: usage drift with carol's usage lost flagged %v (after %v), want within %v of the restart (last scrape: %v)\n%s",
			held, took.Round(time.Second), within, err, testenv.Tail(s.logs.Bytes()))
	}
	// and the loss detector counts one of the two users' losses: it sees
	// a fall net of what the jobs' next charges put back (22.05.8, a
	// checkpoint 9 s before the pass: bob's alone, carol having fallen
	// 4.3% with her 128-CPU soak job running too; right after a pass: both)
	lostAt := func(m map[string]float64, user, account string) float64 {
		return m[series("slurmdbd_fairshare_usage_loss_timestamp_seconds", "slurm_cluster", c.Name, "account", account, "user", user, "partition", "", "kind", result.LossAcrossRestart)]
	}
	m, held, _ = s.scrapeUntil(max(time.Until(restarted.Add(within)), 2*time.Second), 2*time.Second, func(m map[string]float64) bool {
		return m[lostRestart] > lost0 && max(lostAt(m, "carol", "chem"), lostAt(m, "bob", "phys")) >= float64(killed.Unix())
	})
	t.Logf("kill: across_restart losses %v after %v; carol's read at %+.0f s, bob's at %+.0f s", m[lostRestart], time.Since(restarted).Round(time.Second),
		lostAt(m, "carol", "chem")-float64(restarted.Unix()), lostAt(m, "bob", "phys")-float64(restarted.Unix()))
	if !held {
		t.Errorf("slurmctld killed and restarted from its checkpoint: neither carol's nor bob's usage loss counted across the restart within %v (%s %v)", within, lostRestart, m[lostRestart])
	}
	return restarted
}
