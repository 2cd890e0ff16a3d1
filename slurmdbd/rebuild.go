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
	// Base is usage already decayed to At per id_assoc and TRES (a
	// Refresher's frozen sums), added as it is.
	Base map[Key]float64
}

// Usage is decayed usage per tree association.
type Usage struct {
	// Raw is billing TRES usage: slurmctld's usage_raw, fairshare's input.
	Raw []float64
	// TRES holds every TRES but energy by id (TRESBilling's is Raw):
	// slurmctld's usage_tres_raw, which it keeps only with
	// AccountingStorageEnforce=limits.
	TRES map[uint32][]float64
}

// RawUsage rebuilds every tree association's decayed usage at At, the way
// slurmctld accumulates it: rolled-up alloc_secs (finest table first)
// spread evenly over their period, plus the jobs of the time after the last
// hourly rollup charged pass by pass with their QOS UsageFactor. Usage of a
// removed user association stays with its account (Slurm 22.05+
// leaf_usage); accounts and root hold the sum of their subtree. Rows that
// cannot be placed are reported, not fatal.
func RawUsage(in UsageInputs) (u Usage, problems []error) {
	n := len(in.Tree.Assocs)
	u.TRES = map[uint32][]float64{TRESBilling: make([]float64, n)}
	node := nodes(in.Rows, in.Tree)
	add := func(k Key, v float64, what string) {
		i, ok := node[k.Assoc]
		if !ok {
			problems = append(problems, fmt.Errorf("%s of id_assoc=%d: no live association to charge it to: left out", what, k.Assoc))
			return
		}
		s := u.TRES[k.TRES]
		if s == nil {
			s = make([]float64, n)
			u.TRES[k.TRES] = s
		}
		s[i] += v
	}
	for k, v := range in.Base {
		add(k, v, "usage")
	}
	for _, b := range []struct {
		rows []UsageRow
		p    Period
	}{{in.Hours, Hour}, {in.Days, Day}, {in.Months, Month}} {
		for _, r := range b.rows {
			add(Key{r.Assoc, r.TRES}, in.bucket(r, b.p), string(b.p)+"ly usage")
		}
	}

	jobsFrom := max(float64(in.LastRan.Hourly), in.Since)
	for _, j := range in.Jobs {
		counts, err := TRESCounts(j.TRESAlloc)
		if err != nil {
			problems = append(problems, fmt.Errorf("job_db_inx=%d: %w: left out", j.Inx, err))
			continue
		}
		uf := 1.0
		if q, ok := in.QOS[j.QOS]; ok && q.UsageFactor >= 0 {
			uf = q.UsageFactor
		}
		// Usage is linear in the count: one walk over the passes per job.
		w := in.Passes.JobUsage(max(float64(j.Start), jobsFrom), float64(j.End), in.At, uf)
		what := fmt.Sprintf("job_db_inx=%d", j.Inx)
		billed := false
		for _, c := range counts {
			if c[0] == TRESEnergy || c[1] == 0 {
				continue
			}
			billed = billed || c[0] == TRESBilling
			add(Key{j.Assoc, uint32(c[0])}, w*float64(c[1]), what)
		}
		if !billed {
			// no billing TRES recorded: slurmctld bills the CPUs
			cpus, _, _ := TRESCount(j.TRESAlloc, 1)
			add(Key{j.Assoc, TRESBilling}, w*float64(cpus), what)
		}
	}

	// Subtree sums: parents come first, so walk backwards.
	for _, s := range u.TRES {
		for i := n - 1; i > 0; i-- {
			s[in.Tree.Assocs[i].Parent] += s[i]
		}
	}
	u.Raw = u.TRES[TRESBilling]
	return u, problems
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
