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
	// charges its 100k frozen sums once when they change, not at every
	// refresh (two thirds of a steady refresh's CPU).
	Charged   *Charged
	BaseScale float64

	// weights is Bucket's weight of one alloc_sec per rollup row start
	// and period: every row of an hour decays alike, and a math.Pow per
	// row was a quarter of a steady refresh's CPU at 10k associations.
	weights map[bucketKey]float64
	// hours are the weights of the hours from hoursBase on, one a slot
	// (0: not computed yet): rowWeight looks up every rolled-up hour of
	// every job it reweighs.
	hours     []float64
	hoursBase int64
}

type bucketKey struct {
	start int64
	p     Period
}

// Frozen is usage kept per id_assoc and TRES, decayed to the pass At, and
// finished jobs' uncharged usage per id_assoc: a Refresher's frozen sums,
// which only decay forward.
type Frozen struct {
	Usage     map[Key]float64
	Uncharged map[uint32]float64
	At        float64
}

// NewFrozen is empty frozen sums decayed to at.
func NewFrozen(at float64) Frozen {
	return Frozen{Usage: map[Key]float64{}, Uncharged: map[uint32]float64{}, At: at}
}

// Add adds o's sums to f's (decayed to the same moment).
func (f Frozen) Add(o Frozen) {
	for k, v := range o.Usage {
		f.Usage[k] += v
	}
	for id, v := range o.Uncharged {
		f.Uncharged[id] += v
	}
}

// AddRows adds each row's decayed contribution at in.At (Bucket).
func (f Frozen) AddRows(in *Inputs, rows []Row, p Period) {
	for _, u := range rows {
		f.Usage[Key{u.Assoc, u.TRES}] += in.Bucket(u, p)
	}
}

// Advance decays f to the pass now and adds newly, decayed to now already.
func (f *Frozen) Advance(p fairshare.Passes, now float64, newly Frozen) {
	decay := math.Pow(p.D(), now-f.At)
	for k := range f.Usage {
		f.Usage[k] *= decay
	}
	for id := range f.Uncharged {
		f.Uncharged[id] *= decay
	}
	f.Add(newly)
	f.At = now
}

// Scale is the decay from f.At to now.
func (f Frozen) Scale(p fairshare.Passes, now float64) float64 {
	return math.Pow(p.D(), now-f.At)
}

// Charged is usage kept per id_assoc, charged to the tree associations
// that carry it: per TRES and tree association, and uncharged usage per
// tree association, before subtree sums.
type Charged struct {
	TRES      map[uint32][]float64
	Uncharged []float64
	Problems  []error
}

// chargeTo adds v to TRES k.TRES of the tree association that carries
// k.Assoc (through Node), unless the TRES is not kept (AllTRES); an error
// when no association does.
func (in *Inputs) chargeTo(tres map[uint32][]float64, k Key, v float64, what string) error {
	if !KeepsTRES(k.TRES, in.AllTRES) {
		return nil
	}
	i, ok := in.Node[k.Assoc]
	if !ok {
		return fmt.Errorf("%s of id_assoc=%d: no live association to charge it to: left out", what, k.Assoc)
	}
	s := tres[k.TRES]
	if s == nil {
		s = make([]float64, len(in.Assocs))
		tres[k.TRES] = s
	}
	s[i] += v
	return nil
}

// Charge charges usage and uncharged usage kept per id_assoc to the tree,
// through Node.
func (in *Inputs) Charge(f Frozen) *Charged {
	n := len(in.Assocs)
	c := &Charged{TRES: map[uint32][]float64{TRESBilling: make([]float64, n)}, Uncharged: make([]float64, n)}
	for k, v := range f.Usage {
		if err := in.chargeTo(c.TRES, k, v, "usage"); err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	for id, v := range f.Uncharged {
		if i, ok := in.Node[id]; ok {
			c.Uncharged[i] += v
		}
	}
	return c
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
	// jobs charged at their recorded, truncated billing (Job.Unpriced)
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
		if j.Unpriced {
			b.add(Key{j.Assoc, tresUnpriced}, factor(in.UsageFactor, j.QOS)*(after+in.rowWeight(j)), "")
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
	t, problems := b.in.Tails(b.in.Ended, true)
	b.problems = append(b.problems, problems...)
	for k, v := range t.Usage {
		b.add(k, v, "finished jobs' usage")
	}
	for id, v := range t.Uncharged {
		if i, ok := b.in.Node[id]; ok {
			b.u.Uncharged[i] += v
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

// tailSlack is how far below zero (TRES-seconds) an association's own
// usage may come out and still be rounding. A finished job's tail is taken
// out of rollups that were spread over their hour, decayed and summed in
// another order (frozen sums are scaled once per refresh), so a job whose
// whole usage is its tail leaves a remainder of either sign near 0: the
// exporter failed every refresh on -9.2e-11 once the fault tests' data
// had decayed for two days.
const tailSlack = 1.0

// clampTails sets negative own usage (before subtree sums) to 0: usage
// cannot be below zero, and fairshare rejects it. A value below -tailSlack
// is more than rounding: the job records and rollups disagree, and it is
// reported.
func clampTails(s []float64, id uint32, assocs []fairshare.Association) (problems []error) {
	for i, v := range s {
		if v >= 0 {
			continue
		}
		if v < -tailSlack {
			a := assocs[i]
			problems = append(problems, &Problem{Identity: fmt.Sprintf("negative usage of id_tres=%d of account=%q user=%q", id, a.Account, a.User),
				Err: fmt.Errorf("usage of id_tres=%d of account=%q user=%q is %g after taking out finished jobs' uncharged tails: the job records and rollups disagree: counted as 0", id, a.Account, a.User, v)})
		}
		s[i] = 0
	}
	return problems
}

// tresCharge is what a job charges per second of one TRES, and the count
// tres_alloc records of it, which the rollups count (-1: none recorded:
// billing charged as the CPUs).
type tresCharge struct {
	id       uint32
	per      float64
	recorded float64
}

// jobTRES is what a job charges per second: each TRES count but energy
// times its QOS UsageFactor, its billing the one slurmctld charges (Billed
// where priced), and billing alone (the CPUs when the job recorded no
// billing, as slurmctld bills them).
func jobTRES(j Job, factors map[uint32]float64) (per []tresCharge, billing float64, err error) {
	counts, err := TRESCounts(j.TRESAlloc)
	if err != nil {
		return nil, 0, fmt.Errorf("job_db_inx=%d: %w: left out", j.Inx, err)
	}
	uf := factor(factors, j.QOS)
	billing = -1
	for _, c := range counts {
		if c[0] == TRESEnergy || c[1] == 0 {
			continue
		}
		n, rec := float64(c[1]), float64(c[1])
		if c[0] == TRESBilling {
			if j.Priced {
				n = j.Billed
			}
			billing = n * uf
		}
		per = append(per, tresCharge{uint32(c[0]), n * uf, rec})
	}
	if billing < 0 {
		cpus, _, _ := TRESCount(j.TRESAlloc, TRESCPU)
		billing = float64(cpus) * uf
		per = append(per, tresCharge{TRESBilling, billing, -1})
	}
	return per, billing, nil
}

// JobBilling is what a job charges per second of billing, QOS UsageFactor
// (factors by id_qos) applied: the CPUs where the job recorded no billing,
// as slurmctld bills them and the rebuild charges.
func JobBilling(j Job, factors map[uint32]float64) (float64, error) {
	_, billing, err := jobTRES(j, factors)
	return billing, err
}

// Tails takes finished jobs' uncharged last intervals (tail) out of the
// rolled-up usage, which counts them: the (negative) usage per id_assoc
// and TRES, and the uncharged billing usage per id_assoc. With retimed,
// the usage also moves their seconds in partial hours to their own time
// (see retime).
func (in *Inputs) Tails(jobs []Job, retimed bool) (Frozen, []error) {
	f := NewFrozen(in.At)
	var problems []error
	for _, j := range jobs {
		t, r := in.tail(j, in.Since), 0.0
		out := t // what comes out of the rows
		if retimed {
			// retime weighs the tail's seconds in the hours it moves as
			// slurmctld charged them: not at all
			r = in.retime(j)
			for _, h := range in.retimedHours(j) {
				out -= in.tailIn(j, in.Since, float64(h), float64(h+3600))
			}
		}
		rate, most, lost := in.tailRisk(j, in.Since)
		per, billing, err := jobTRES(j, in.UsageFactor)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for _, c := range in.rowExcess(j, per) {
			f.Usage[Key{j.Assoc, c.id}] += c.per
		}
		if j.Unpriced {
			f.Usage[Key{j.Assoc, tresUnpriced}] += factor(in.UsageFactor, j.QOS) * in.rowWeight(j)
		}
		if t == 0 && r == 0 && rate == 0 {
			continue
		}
		for _, c := range per {
			f.Usage[Key{j.Assoc, c.id}] += (r - out) * c.per
		}
		if t != 0 {
			f.Uncharged[j.Assoc] += t * billing
		}
		f.Usage[Key{j.Assoc, tresTailRate}] += rate * billing
		f.Usage[Key{j.Assoc, tresTailMost}] += most * billing
		f.Usage[Key{j.Assoc, tresTailLost}] += lost * billing
	}
	return f, problems
}

// tailRisk is j's part of TailRisk per unit of billing (0 for a running
// job, or when slurmctld charges the tail at the job's end).
func (in *Inputs) tailRisk(j Job, from float64) (rate, most, lost float64) {
	if in.Passes.ChargeJobEnd || j.End == 0 {
		return 0, 0, 0
	}
	end := float64(j.End)
	start := max(float64(j.Start), from)
	if end <= start {
		return 0, 0, 0
	}
	rate = math.Pow(in.Passes.D(), max(0, in.At-end))
	if p := in.Passes; p.LockWait > 0 && p.Period > 0 {
		// the pass's charge of its interval, decayed from the pass: at
		// least d^(At-end+P) since At is less than a period past it
		if pass := p.LastPass(end); end-pass <= p.LockWait && pass > start {
			lost = math.Pow(p.D(), max(0, in.At-end-p.Period)) * (pass - max(start, pass-p.Period))
		}
	}
	return rate, rate * min(in.Passes.Period, end-start), lost
}

// ranWithinPeriod: j ran at some time in the PriorityCalcPeriod up to At.
func (in *Inputs) ranWithinPeriod(j Job) bool {
	return j.Start > 0 && float64(j.Start) < in.At && (j.End == 0 || float64(j.End) > in.At-in.Passes.Period)
}

// tail is the decayed usage per unit of count that slurmctld never charges
// of a finished job: from the last pass before its end (or its start,
// whichever is later, but not before from) to its end, unless
// AccountingStorageEnforce=limits charges it at the end.
func (in *Inputs) tail(j Job, from float64) float64 {
	return in.tailIn(j, from, math.Inf(-1), math.Inf(1))
}

// tailIn is the part of tail in [lo, hi).
func (in *Inputs) tailIn(j Job, from, lo, hi float64) float64 {
	if in.Passes.ChargeJobEnd || j.End == 0 {
		return 0
	}
	end := min(float64(j.End), hi)
	start := max(float64(j.Start), from, in.Passes.LastPass(float64(j.End)), lo)
	if end <= start {
		return 0
	}
	return in.Passes.BucketUsage(start, end, in.At, end-start)
}

// Bucket is a rollup row's decayed contribution at At: spread evenly over
// its hour, day or month (local days and months, as slurmdbd rolls them),
// cut at the last hourly rollup and at the last reset.
func (in *Inputs) Bucket(u Row, p Period) float64 {
	return u.AllocSecs * in.cachedWeight(u.Start, p)
}

func (in *Inputs) cachedWeight(start int64, p Period) float64 {
	k := bucketKey{start, p}
	w, ok := in.weights[k]
	if !ok {
		w = in.weight(start, p)
		if in.weights == nil {
			in.weights = map[bucketKey]float64{}
		}
		in.weights[k] = w
	}
	return w
}

// retime is what a job's seconds in partial rolled-up hours (the hour it
// started in, the hour it ended in) weigh at their own time, as slurmctld
// charged them (JobUsageIn), rather than spread over the hour with the
// rest of the row, per unit of count. A full hour of the job is its row's
// spread already. Without it, right after each rollup the minutes a
// running job had before it weighed as if at the middle of the hour: with
// a one-hour half-life a quarter less than slurmctld charged
// (TestRetimedPartialHours). Spread as one job in the bucket
// (BucketUsage) instead, a 4-minute job's usage was 1.7% above slurmctld's
// at a 10-minute half-life. Hours before HoursFrom are frozen
// as spread: by then the difference is at most 0.35·3600/HalfLife of an
// hour's usage, decayed by the six hours of slurmdbd.DefaultReread.
func (in *Inputs) retime(j Job) float64 {
	r := 0.0
	for _, h := range in.retimedHours(j) {
		r += in.retimeHour(h, j)
	}
	return r
}

// retimedHours are the rolled-up hours retime moves j's seconds in: the
// one it started in and the one it ran in last before the last rollup,
// from HoursFrom on.
func (in *Inputs) retimedHours(j Job) []int64 {
	end := float64(in.LastHourly)
	if j.End != 0 {
		end = min(end, float64(j.End))
	}
	if end <= float64(j.Start) {
		return nil
	}
	var hours []int64
	first := Hour.Start(j.Start, in.location())
	if float64(first) >= in.HoursFrom {
		hours = append(hours, first)
	}
	if last := Hour.Start(int64(math.Ceil(end))-1, in.location()); last != first && float64(last) >= in.HoursFrom {
		hours = append(hours, last)
	}
	return hours
}

// retimeHour is retime for j's seconds in the rolled-up hour beginning at
// h.
func (in *Inputs) retimeHour(h int64, j Job) float64 {
	from, to := max(float64(j.Start), float64(h)), float64(min(h+3600, in.LastHourly))
	if j.End != 0 {
		to = min(to, float64(j.End))
	}
	if to <= from {
		return 0
	}
	own := in.Passes.JobUsageIn(float64(j.Start), float64(j.End), max(from, in.Since), to, in.At, 1)
	return own - (to-from)*in.cachedWeight(h, Hour)
}

// location is Location, the local zone where none is given.
func (in *Inputs) location() *time.Location {
	if in.Location == nil {
		return time.Local
	}
	return in.Location
}

// weight is what one alloc_sec of a row starting at start weighs at At
// (BucketUsage is linear in the amount): the row's usage spread evenly over
// its period, of which only the part after the reset and before the last
// rollup counts. A rolled-up period has ended by the last rollup, but not
// by the moment of check --at, whose last rollup is as of then
// (slurmdbd's LastRan.asOf).
func (in *Inputs) weight(start int64, p Period) float64 {
	from, to := float64(start), float64(p.End(start, in.location()))
	lo, hi := max(from, in.Since), min(to, float64(in.LastHourly))
	if hi <= lo {
		return 0
	}
	return in.Passes.BucketUsage(lo, hi, in.At, (hi-lo)/(to-from))
}

func scaled(s []float64, k float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = v * k
	}
	return out
}

// rowExcess is, per TRES, the usage j's seconds in the rolled-up hours
// add beyond what the rows count of them: the rows count each second at
// the TRES counts tres_alloc records, the billing truncated to an integer
// and, unless RowsByQOS, without UsageFactor, where slurmctld charged per
// (jobTRES). The excess is weighed as the rows' seconds are (rowWeight).
func (in *Inputs) rowExcess(j Job, per []tresCharge) []tresCharge {
	if j.Start >= in.LastHourly || j.End != 0 && j.End <= j.Start {
		return nil
	}
	rowFactor := 1.0
	if in.RowsByQOS {
		rowFactor = factor(in.UsageFactor, j.QOS)
	}
	var out []tresCharge
	var w float64
	for _, c := range per {
		if c.recorded < 0 {
			continue // billing charged as the CPUs: the rows have none
		}
		if d := c.per - c.recorded*rowFactor; d != 0 {
			if w == 0 {
				w = in.rowWeight(j)
			}
			out = append(out, tresCharge{id: c.id, per: d * w})
		}
	}
	return out
}

// rowWeight is what j's seconds in the rolled-up hours weigh at At per
// unit of count as the rows count them: each hour's row spread evenly
// over it (Bucket). The retimed partial hours weigh at their own time
// (retime), but retime charges that difference at jobTRES's rate already.
func (in *Inputs) rowWeight(j Job) float64 {
	hi := float64(in.LastHourly)
	if j.End != 0 {
		hi = min(hi, float64(j.End))
	}
	from, _ := Horizon(in.Passes, int64(in.At), int64(in.Since))
	lo := max(float64(j.Start), float64(from))
	w := 0.0
	for h := Hour.Start(int64(lo), in.location()); float64(h) < hi; h += 3600 {
		w += (min(hi, float64(h+3600)) - max(lo, float64(h))) * in.hourWeight(h)
	}
	return w
}

// hourWeight is cachedWeight(h, Hour), kept by the slot from the horizon's
// hour on, where the hours of rowWeight run one after the other.
func (in *Inputs) hourWeight(h int64) float64 {
	if in.hours == nil {
		from, _ := Horizon(in.Passes, int64(in.At), int64(in.Since))
		in.hoursBase = Hour.Start(from, in.location())
		in.hours = make([]float64, (in.LastHourly-in.hoursBase)/3600+2)
	}
	i := (h - in.hoursBase) / 3600
	if h < in.hoursBase || (h-in.hoursBase)%3600 != 0 || i >= int64(len(in.hours)) {
		return in.cachedWeight(h, Hour)
	}
	if in.hours[i] == 0 {
		in.hours[i] = in.cachedWeight(h, Hour)
	}
	return in.hours[i]
}
