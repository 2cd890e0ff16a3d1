package slurmdbd

import (
	"cmp"
	"slices"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// Tables are the rows of one cluster's tables that a rebuild reads, held
// in memory instead of a database: a simulated slurmdbd (serve --demo)
// writes them as slurmdbd would, and Snapshot rebuilds them as a full
// Refresh does, with usage.Rebuild, without SQL.
type Tables struct {
	Cluster   string
	Assocs    []Assoc
	Hours     []usage.Row // <cluster>_assoc_usage_hour_table, billing TRES
	Jobs      []usage.Job // <cluster>_job_table
	LastRan   LastRan
	QOS       map[uint32]QOS
	TRESNames map[uint32]string
}

// Snapshot rebuilds usage at at as ref says (Passes, Since, Boot,
// Location), from every hour row and job: a simulated cluster holds days,
// not the years a Refresher keeps frozen.
func (t *Tables) Snapshot(at time.Time, ref *Refresher) (*Snapshot, error) {
	rows := slices.Clone(t.Assocs)
	if !ref.Boot.IsZero() {
		OrderAsSlurmctld(rows, ref.Boot)
	}
	tree, err := BuildTree(rows)
	if err != nil {
		return nil, err
	}
	loc := ref.Location
	if loc == nil {
		loc = time.Local
	}
	lastRan := t.LastRan.asOf(at.Unix(), loc)
	in := usage.Inputs{Assocs: tree.Assocs, Node: nodes(rows, tree), UsageFactor: usageFactors(t.QOS), LastHourly: lastRan.Hourly,
		Passes: ref.Passes, At: fairshare.Seconds(at), Location: loc}
	if !ref.Since.IsZero() {
		in.Since = float64(ref.Since.Unix())
	}
	end := at.Unix() + 1
	for _, h := range t.Hours {
		if h.Start < lastRan.Hourly && h.Start >= int64(in.Since) {
			in.Hours = append(in.Hours, h)
		}
	}
	if len(in.Hours) > 0 {
		in.HoursFrom = float64(slices.MinFunc(in.Hours, func(a, b usage.Row) int { return cmp.Compare(a.Start, b.Start) }).Start)
	}
	for _, j := range t.Jobs {
		switch {
		case j.Start >= end || j.Start == 0:
		case j.End == 0 || j.End > lastRan.Hourly:
			// running, or ended after the last rollup: charged pass by pass
			if j.End >= end {
				j.End = 0
			}
			in.Jobs = append(in.Jobs, j)
		case (!ref.Passes.ChargeJobEnd || j.SubmitCharge != 0 || j.End > lastRan.Hourly-ref.reread()) && j.End <= lastRan.Hourly && float64(j.End) >= in.HoursFrom:
			// their tails, out of the rolled-up hours; their charges at
			// submission, which the hours have none of; as a Refresher
			// reads them, those that ended in the hours it reads again:
			// their partial hours retimed, and their rate while they
			// may have run since the last pass (Usage.Running)
			in.Ended = append(in.Ended, j)
		}
	}
	u, problems := usage.Rebuild(in)
	for i := range tree.Assocs {
		tree.Assocs[i].RawUsage = u.Raw[i]
	}
	return &Snapshot{Cluster: t.Cluster, Rows: rows, Tree: tree, TRES: u.TRES, Uncharged: u.Uncharged, Running: u.Running, TailRisk: u.TailRisk, Jobs: in.Jobs,
		TRESNames: t.TRESNames, QOS: t.QOS, LastRan: lastRan, At: at, Full: true, Problems: append(tree.Problems, problems...)}, nil
}
