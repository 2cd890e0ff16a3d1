package slurmdbd

import (
	"context"
	"database/sql"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// RunningJob is a job running at a moment, with what it charges per
// second and when its time limit stops it.
type RunningJob struct {
	usage.Job
	// Billing is billable TRES per second, QOS UsageFactor applied (the
	// CPUs where the job recorded no billing, as the rebuild charges).
	Billing float64
	// LimitEnd is time_start plus timelimit (unix seconds); 0 when the
	// job has none (INFINITE, NO_VAL, or 0 as a generated row holds).
	LimitEnd int64
}

// sqlRunningJobs reads the jobs that ran in (t, t+1] (args: t+1, t):
// started by t, not ended by t.
const sqlRunningJobs = "SELECT " + sqlJobCols + ", `timelimit` FROM `%[1]s_job_table`" + sqlJobsRan

// RunningJobs reads the jobs running at at (started by then, not ended
// by then). A job whose TRES string cannot be read is left out and
// reported in problems.
func (c Cluster) RunningJobs(ctx context.Context, at time.Time) (jobs []RunningJob, problems []error, err error) {
	qos, err := c.db.QOS(ctx)
	if err != nil {
		return nil, nil, err
	}
	factors := usageFactors(qos)
	t := at.Unix()
	err = c.db.query(ctx, "reading running jobs from "+c.quoted("job_table"), c.fill(sqlRunningJobs, submitCharge(false)), func(r *sql.Rows) error {
		var j RunningJob
		var limit uint32
		if err := scanJob(r, &j.Job, &limit); err != nil {
			return err
		}
		billing, err := usage.JobBilling(j.Job, factors)
		if err != nil {
			problems = append(problems, err)
			return nil
		}
		j.Billing = billing
		if limit > 0 && limit < 0xfffffffe {
			j.LimitEnd = j.Start + int64(limit)*60
		}
		jobs = append(jobs, j)
		return nil
	}, t+1, t)
	return jobs, problems, err
}

// BillingUsage sums rolled-up billing usage (QOS UsageFactor applied as
// in Usage) per id_assoc over the hours starting in [from, to): what an
// association used over a window, for the rate the forecast assumes.
func (c Cluster) BillingUsage(ctx context.Context, from, to time.Time) (map[uint32]float64, error) {
	out := map[uint32]float64{}
	err := c.billingHours(ctx, from.Unix(), to.Unix(), func(u usage.Row) { out[u.Assoc] += u.AllocSecs })
	return out, err
}
