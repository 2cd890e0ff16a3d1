package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// billingQuiet fails the test where serve counts jobs billed other than
// slurm.conf says on a healthy cluster, and returns how many jobs it
// checked.
func billingQuiet(t *testing.T, m map[string]float64, cluster string) (checked float64) {
	t.Helper()
	for k, v := range prefixed(m, "slurmdbd_fairshare_billing_mismatched_jobs{") {
		if v != 0 {
			t.Errorf("healthy cluster: %s %v", k, v)
		}
	}
	for _, v := range prefixed(m, "slurmdbd_fairshare_billing_checked_jobs{") {
		checked += v
	}
	return checked
}

// billingFault: slurm.conf gives partition p2 TRESBillingWeights 10% above
// what slurmctld, not reconfigured, bills by (CPU=1.1 against the CPUs),
// and a 20-CPU job starts there: slurmctld records billing 20, slurm.conf
// gives 22. serve (reading slurm.conf at every refresh) must count it
// within two PriorityCalcPeriods of the job's start, Prometheus fire
// BillingWeightsMismatch, and check in database mode report it. The job is cancelled and slurm.conf left as it
// was on the way out.
func billingFault(t *testing.T, c *slurmharness.Cluster, s *served, prom *promServer) {
	t.Helper()
	mismatched := series("slurmdbd_fairshare_billing_mismatched_jobs", "slurm_cluster", c.Name, "partition", "p2")
	ratio := series("slurmdbd_fairshare_billing_ratio", "slurm_cluster", c.Name, "partition", "p2")
	if m, _ := s.scrape(); m[mismatched] != 0 {
		t.Errorf("before the billing fault: %s %v", mismatched, m[mismatched])
	}
	c.SetPartition("p2", "TRESBillingWeights=CPU=1.1")
	defer c.SetPartition("p2", "")
	id := c.Submit("alice", "phys", "p2", 20, 600)
	defer c.Run("scancel", id)
	c.WaitRunning(5*time.Minute, id)
	started := time.Now()
	within := 2 * c.CalcPeriod()
	m, held, err := s.scrapeUntil(within, 2*time.Second, func(m map[string]float64) bool { return m[mismatched] >= 1 })
	if !held {
		t.Fatalf("TRESBillingWeights 10%% above slurmctld's: no job counted billed otherwise within %v of its start (last scrape: %v): billing series %v",
			within, err, prefixed(m, "slurmdbd_fairshare_billing_"))
	}
	t.Logf("TRESBillingWeights 10%% above slurmctld's: flagged %v after the job started; %s %v, %s %v",
		time.Since(started).Round(time.Second), mismatched, m[mismatched], ratio, m[ratio])
	// other jobs of p2 that started since may have been billed alike
	if r := m[ratio]; r < 0.85 || r >= 1 {
		t.Errorf("billing ratio %v: expected 20/22 (0.91) for the job", r)
	}
	as := prom.waitAlerts("BillingWeightsMismatch firing", 2*time.Minute, func(as []promAlert) bool { return firing(as)["BillingWeightsMismatch"] })
	t.Logf("Prometheus after the billing fault: %s", alertList(as))

	// check in database mode on serve's database and files says so too
	var args []string
	for i, a := range s.cmd.Args[:len(s.cmd.Args)-1] {
		if a == "--dsn-file" || a == "--slurm-conf" || a == "--slurm.state-dir" {
			args = append(args, a, s.cmd.Args[i+1])
		}
	}
	code, rep, stderr := checkJSON(t, c.Env(), append(args, "--phase.wait", "0")...)
	i := slices.IndexFunc(rep.Billing, func(b result.Billing) bool { return b.Partition == "p2" })
	if code != 1 || i < 0 || rep.Billing[i].Mismatched < 1 {
		t.Errorf("check in database mode after the billing fault: exit %d, billing %+v: want exit 1 and p2's job billed otherwise\n%s", code, rep.Billing, stderr)
	}
}
