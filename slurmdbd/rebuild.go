package slurmdbd

import (
	"fmt"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// UsageInputs is what the database says about usage, as read by
// Cluster.Snapshot, plus how slurmctld decays it.
type UsageInputs struct {
	Rows    []Assoc // every association row, deleted ones included
	Tree    *Tree
	Hours   []UsageRow
	Days    []UsageRow
	Months  []UsageRow
	Jobs    []Job
	QOS     map[uint32]QOS
	LastRan LastRan
	Passes  fairshare.Passes
	// At is the moment to rebuild raw usage for (unix seconds).
	At float64
	// Since cuts history (PriorityUsageResetPeriod's last reset; 0: none).
	Since float64
	// Location is the time zone slurmdbd rolls days and months up in.
	Location *time.Location
	// Base is usage already decayed to At per id_assoc (a Refresher's
	// frozen sums), added as it is.
	Base map[uint32]float64
}

// RawUsage rebuilds every tree association's decayed raw usage at At, the
// way slurmctld accumulates it: rolled-up billing alloc_secs (finest table
// first) spread evenly over their period, plus the jobs of the time after
// the last hourly rollup charged pass by pass with their QOS UsageFactor.
// Usage of a removed user association stays with its account (Slurm 22.05+
// leaf_usage); accounts and root hold the sum of their subtree. Rows that
// cannot be placed are reported, not fatal.
func RawUsage(in UsageInputs) (raw []float64, problems []error) {
	n := len(in.Tree.Assocs)
	own := make([]float64, n)
	node := nodes(in.Rows, in.Tree)
	add := func(assoc uint32, v float64, what string) {
		i, ok := node[assoc]
		if !ok {
			problems = append(problems, fmt.Errorf("%s of id_assoc=%d: no live association to charge it to: left out", what, assoc))
			return
		}
		own[i] += v
	}
	for id, v := range in.Base {
		add(id, v, "usage")
	}
	rollupEnd := float64(in.LastRan.Hourly)
	for _, b := range []struct {
		rows []UsageRow
		p    Period
	}{{in.Hours, Hour}, {in.Days, Day}, {in.Months, Month}} {
		for _, u := range b.rows {
			add(u.Assoc, in.bucket(u, b.p), string(b.p)+"ly usage")
		}
	}

	jobsFrom := max(rollupEnd, in.Since)
	for _, j := range in.Jobs {
		billing, ok, err := TRESCount(j.TRESAlloc, TRESBilling)
		if err != nil {
			problems = append(problems, fmt.Errorf("job_db_inx=%d: %w: left out", j.Inx, err))
			continue
		}
		if !ok {
			// no billing TRES recorded: slurmctld bills the CPUs
			billing, _, _ = TRESCount(j.TRESAlloc, 1)
		}
		uf := 1.0
		if q, ok := in.QOS[j.QOS]; ok && q.UsageFactor >= 0 {
			uf = q.UsageFactor
		}
		start := max(float64(j.Start), jobsFrom)
		add(j.Assoc, in.Passes.JobUsage(start, float64(j.End), in.At, float64(billing)*uf), fmt.Sprintf("job_db_inx=%d", j.Inx))
	}

	// Subtree sums: parents come first, so walk backwards.
	raw = own
	for i := n - 1; i > 0; i-- {
		raw[in.Tree.Assocs[i].Parent] += raw[i]
	}
	return raw, problems
}

// bucket is a rollup row's decayed contribution at At: spread evenly over
// its hour, day or month (local days and months, as slurmdbd rolls them),
// cut at the last hourly rollup and at the last reset.
func (in *UsageInputs) bucket(u UsageRow, p Period) float64 {
	loc := in.Location
	if loc == nil {
		loc = time.Local
	}
	from := float64(u.Start)
	var to float64
	switch p {
	case Hour:
		to = from + 3600
	case Day:
		to = float64(time.Unix(u.Start, 0).In(loc).AddDate(0, 0, 1).Unix())
	case Month:
		to = float64(time.Unix(u.Start, 0).In(loc).AddDate(0, 1, 0).Unix())
	}
	to = min(to, float64(in.LastRan.Hourly))
	amount := u.AllocSecs
	if from < in.Since {
		// keep the part after the reset
		if to <= in.Since {
			return 0
		}
		amount *= (to - in.Since) / (to - from)
		from = in.Since
	}
	return in.Passes.BucketUsage(from, to, in.At, amount)
}

// nodes maps id_assoc to the tree association that carries its usage:
// itself when live, its account for a removed user, the nearest live
// ancestor account for a removed account.
func nodes(rows []Assoc, t *Tree) map[uint32]int {
	node := make(map[uint32]int, len(rows))
	account := map[string]int{}
	for i, r := range t.Row {
		node[rows[r].ID] = i
		if rows[r].User == "" {
			account[rows[r].Account] = i
		}
	}
	parentOf := map[string]string{}
	for _, r := range rows {
		if r.User == "" {
			parentOf[r.Account] = r.ParentAccount
		}
	}
	for _, r := range rows {
		if _, ok := node[r.ID]; ok {
			continue
		}
		name := r.Account
		if r.User == "" {
			name = r.ParentAccount
		}
		for hops := 0; name != "" && hops < 64; hops++ {
			if i, ok := account[name]; ok {
				node[r.ID] = i
				break
			}
			name = parentOf[name]
		}
	}
	return node
}
