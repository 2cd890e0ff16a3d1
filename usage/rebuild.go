package usage

import (
	"fmt"
	"math"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Inputs is what the database says about usage, as read by slurmdbd's
// Refresher, plus how slurmctld decays it.
type Inputs struct {
	// Assocs is the live association tree, parents first
	// (slurmdbd.Tree.Assocs); Node maps every id_assoc, deleted ones
	// included, to the index in Assocs of the association that carries
	// its usage.
	Assocs []fairshare.Association
	Node   map[uint32]int
	Hours  []Row
	Days   []Row
	Months []Row
	Jobs   []Job
	// UsageFactor is QOS UsageFactor by id_qos.
	UsageFactor map[uint32]float64
	// LastHourly is the end of the last rolled-up hour (unix seconds):
	// rows count up to it, jobs from it on.
	LastHourly int64
	Passes     fairshare.Passes
	// At is the moment to rebuild raw usage for (unix seconds).
	At float64
	// Since cuts history (PriorityUsageResetPeriod's last reset; 0: none).
	Since float64
	// Location is the time zone slurmdbd rolls days and months up in.
	Location *time.Location
	// Base is usage already decayed to At per id_assoc and TRES (a
	// Refresher's frozen sums), added as it is, and the uncharged usage
	// of older jobs.
	Base Frozen
	// Ended are jobs that ended in rolled-up time since HoursFrom: without
	// Passes.ChargeJobEnd slurmctld never charged their last partial pass
	// interval, which the rollups count; their partial hours are retimed.
	Ended []Job
	// HoursFrom is where Hours begin: the partial hours of Jobs and Ended
	// from it on are retimed (see retime); earlier ones are in Base.
	HoursFrom float64
	// AllTRES keeps every TRES's usage (slurmdbd's Cluster.AllTRES);
	// otherwise billing alone.
	AllTRES bool
	// RowsByQOS: the rows carry QOS UsageFactor (WeighByQOS, from the
	// 24.11+ per-QOS split). Otherwise they count every QOS alike, and
	// the jobs that make them give each its factor (rowExcess).
	RowsByQOS bool
	// Charged, when set, stands for Base charged to the tree (Charge) as
	// of an earlier moment, and BaseScale is the decay since: a Refresher
	// charges its frozen sums once when they change, not at every
	// refresh, where charging them would be most of a steady refresh's CPU.
	Charged   *Charged
	BaseScale float64
	// Kept, when it serves (KeptTails.Serves), stands for the Ended jobs'
	// tails as of an earlier refresh.
	Kept *KeptTails

	// weights is Bucket's weight of one alloc_sec per rollup row start
	// and period: every row of an hour decays alike, so one math.Pow
	// serves them all, where one per row would be a large part of a
	// steady refresh's CPU.
	weights map[bucketKey]float64
	// hours are the weights of the hours from hoursBase on, one a slot
	// (0: not computed yet): rowWeight looks up every rolled-up hour of
	// every job it reweighs.
	hours     []float64
	hoursBase int64
}

// Usage is decayed usage per tree association.
type Usage struct {
	// Raw is billing TRES usage: slurmctld's usage_raw, fairshare's input.
	Raw []float64
	// TRES holds every TRES but energy by id (TRESBilling's is Raw;
	// billing alone without Inputs.AllTRES):
	// slurmctld's usage_tres_raw, which it keeps only with
	// AccountingStorageEnforce=limits.
	TRES map[uint32][]float64
	// Uncharged is billing usage slurmdbd recorded and slurmctld never
	// charged: finished jobs' last partial pass interval, without
	// AccountingStorageEnforce=limits.
	Uncharged []float64
	// Running is the billing rate (per second, QOS UsageFactor applied)
	// of the jobs that ran at some time in the PriorityCalcPeriod before
	// At: what slurmctld may have charged since a decay pass the rebuild
	// cannot place (its phase unknown), and so part of the bound drift is
	// judged against.
	Running []float64
	// TailRisk bounds how much finished jobs' uncharged tails may be off
	// when the moment of slurmctld's passes is known only to within w
	// seconds: min(w·Rate, Most) per tree association (subtree sums).
	TailRisk TailRisk
	// Unpriced is how much more than Raw slurmctld may have charged the
	// jobs whose billing is not known exactly (Job.Spread)
	// (subtree sums).
	Unpriced []float64
}

// TailRisk: see Usage.TailRisk and tresTailRate.
type TailRisk struct {
	Rate, Most, Lost []float64
}

// Rebuild rebuilds every tree association's decayed usage at At, the way
// slurmctld accumulates it: rolled-up alloc_secs (finest table first)
// spread evenly over their period, plus the jobs of the time after the last
// hourly rollup charged pass by pass with their QOS UsageFactor. Usage of a
// removed user association stays with its account (Slurm 22.05+
// leaf_usage, through Node); accounts and root hold the sum of their
// subtree. Rows that cannot be placed are reported, not fatal.
func Rebuild(in Inputs) (Usage, []error) {
	b := &rebuild{in: &in}
	base, scale := in.Charged, in.BaseScale
	if base == nil {
		base, scale = in.Charge(in.Base), 1
	}
	b.problems = append(b.problems, base.Problems...)
	b.u.TRES = make(map[uint32][]float64, len(base.TRES))
	for id, s := range base.TRES {
		b.u.TRES[id] = scaled(s, scale)
	}
	b.u.Uncharged = scaled(base.Uncharged, scale)
	b.rows()
	b.jobs()
	b.running()
	b.ended()
	b.sum()
	return b.u, b.problems
}

// rebuild is Rebuild's work in progress.
type rebuild struct {
	in       *Inputs
	u        Usage
	problems []error
}

func (b *rebuild) add(k Key, v float64, what string) {
	if err := b.in.chargeTo(b.u.TRES, k, v, what); err != nil {
		b.problems = append(b.problems, err)
	}
}

// rows adds the rolled-up rows, finest table first.
func (b *rebuild) rows() {
	for _, t := range []struct {
		rows []Row
		p    Period
	}{{b.in.Hours, Hour}, {b.in.Days, Day}, {b.in.Months, Month}} {
		what := string(t.p) + "ly usage"
		most := t.p.MostAllocSecs()
		for _, r := range t.rows {
			if r.AllocSecs > most {
				b.problems = append(b.problems, fmt.Errorf("%s of id_assoc=%d id_tres=%d time_start=%d: alloc_secs %.0f: expected at most %.0f (2^40 units for a whole %s): left out",
					what, r.Assoc, r.TRES, r.Start, r.AllocSecs, most, t.p))
				continue
			}
			b.add(Key{r.Assoc, r.TRES}, b.in.Bucket(r, t.p), what)
		}
	}
}

// jobs charges the jobs of the time after the last hourly rollup.
func (b *rebuild) jobs() {
	in := b.in
	jobsFrom := max(float64(in.LastHourly), in.Since)
	for _, j := range in.Jobs {
		i, ok := in.Node[j.Assoc]
		if !ok {
			b.problems = append(b.problems, fmt.Errorf("job_db_inx=%d of id_assoc=%d: no live association to charge it to: left out", j.Inx, j.Assoc))
			continue
		}
		per, billing, err := jobTRES(j, in.UsageFactor)
		if err != nil {
			b.problems = append(b.problems, err)
			continue
		}
		// Usage is linear in the count: one walk over the passes per job,
		// plus its seconds before the rollup at their own time.
		after := in.Passes.JobUsageIn(float64(j.Start), float64(j.End), jobsFrom, math.Inf(1), in.At, 1)
		w := after + in.retime(j)
		for _, c := range per {
			b.add(Key{j.Assoc, c.id}, w*c.per, "")
		}
		for _, c := range in.rowExcess(j, per) {
			b.add(Key{j.Assoc, c.id}, c.per, "")
		}
		if j.Spread > 0 {
			// weighed as the job's seconds are: the rows' and retime's
			b.add(Key{j.Assoc, tresUnpriced}, j.Spread*factor(in.UsageFactor, j.QOS)*(w+in.rowWeight(j)), "")
		}
		b.u.Uncharged[i] += in.tail(j, jobsFrom) * billing
		rate, most, lost := in.tailRisk(j, jobsFrom)
		b.add(Key{j.Assoc, tresTailRate}, rate*billing, "")
		b.add(Key{j.Assoc, tresTailMost}, most*billing, "")
		b.add(Key{j.Assoc, tresTailLost}, lost*billing, "")
	}
}

// running sums the billing rate of the jobs that ran in the last
// PriorityCalcPeriod.
func (b *rebuild) running() {
	in := b.in
	b.u.Running = make([]float64, len(in.Assocs))
	for _, jobs := range [][]Job{in.Jobs, in.Ended} {
		for _, j := range jobs {
			if !in.ranWithinPeriod(j) {
				continue
			}
			if i, ok := in.Node[j.Assoc]; ok {
				if _, billing, err := jobTRES(j, in.UsageFactor); err == nil {
					b.u.Running[i] += billing
				}
			}
		}
	}
}

// ended takes the finished jobs' tails out of the rolled-up hours and
// retimes their partial hours.
func (b *rebuild) ended() {
	t, byPass, byMoment, problems := b.in.endedTails()
	b.problems = append(b.problems, problems...)
	for k, v := range t.Usage {
		if tailRiskKey(k.TRES) {
			v *= byMoment
		} else {
			v *= byPass
		}
		b.add(k, v, "finished jobs' usage")
	}
	for id, v := range t.Uncharged {
		if i, ok := b.in.Node[id]; ok {
			b.u.Uncharged[i] += v * byPass
		}
	}
}

// sum clamps own usage at 0, sums subtrees and takes the tail risk out of
// the TRES.
func (b *rebuild) sum() {
	u, assocs, n := &b.u, b.in.Assocs, len(b.in.Assocs)
	for id, s := range u.TRES {
		b.problems = append(b.problems, clampTails(s, id, assocs)...)
	}
	// Subtree sums: parents come first, so walk backwards.
	for _, s := range u.TRES {
		for i := n - 1; i > 0; i-- {
			s[assocs[i].Parent] += s[i]
		}
	}
	for i := n - 1; i > 0; i-- {
		u.Uncharged[assocs[i].Parent] += u.Uncharged[i]
		u.Running[assocs[i].Parent] += u.Running[i]
	}
	u.Raw = u.TRES[TRESBilling]
	u.TailRisk = TailRisk{Rate: u.TRES[tresTailRate], Most: u.TRES[tresTailMost], Lost: u.TRES[tresTailLost]}
	u.Unpriced = u.TRES[tresUnpriced]
	for _, id := range []uint32{tresTailRate, tresTailMost, tresTailLost, tresUnpriced} {
		delete(u.TRES, id)
	}
	if u.Unpriced == nil {
		u.Unpriced = make([]float64, n)
	}
	if u.TailRisk.Rate == nil {
		u.TailRisk.Rate, u.TailRisk.Most = make([]float64, n), make([]float64, n)
	}
	if u.TailRisk.Lost == nil {
		u.TailRisk.Lost = make([]float64, n)
	}
}

func scaled(s []float64, k float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = v * k
	}
	return out
}
