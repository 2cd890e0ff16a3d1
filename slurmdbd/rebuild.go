package slurmdbd

import (
	"fmt"
	"math"
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
	// Ended are jobs that ended in rolled-up time since HoursFrom: without
	// Passes.ChargeJobEnd slurmctld never charged their last partial pass
	// interval, which the rollups count; their partial hours are retimed.
	// BaseUncharged is the uncharged usage of older jobs, already decayed
	// to At, per id_assoc.
	Ended         []Job
	BaseUncharged map[uint32]float64
	// HoursFrom is where Hours begin: the partial hours of Jobs and Ended
	// from it on are retimed (see retime); earlier ones are in Base.
	HoursFrom float64
	// AllTRES keeps every TRES's usage (Cluster.AllTRES); otherwise
	// billing alone.
	AllTRES bool
	// Charged, when set, stands for Base and BaseUncharged charged to the
	// tree (Charge) as of an earlier moment, and BaseScale is the decay
	// since: a Refresher charges its 100k frozen sums once when they
	// change, not at every refresh (two thirds of a steady refresh's CPU).
	Charged   *Charged
	BaseScale float64
	// Node maps id_assoc to the tree association that carries its usage
	// (nil: made from Rows and Tree).
	Node map[uint32]int

	// weights is bucket's weight of one alloc_sec per rollup row start
	// and period: every row of an hour decays alike, and a math.Pow per
	// row was a quarter of a steady refresh's CPU at 10k associations.
	weights map[bucketKey]float64
}

type bucketKey struct {
	start int64
	p     Period
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
// k.Assoc (through node), unless the TRES is not kept (AllTRES); an error
// when no association does.
func (in *UsageInputs) chargeTo(tres map[uint32][]float64, node map[uint32]int, k Key, v float64, what string) error {
	if !keepsTRES(k.TRES, in.AllTRES) {
		return nil
	}
	i, ok := node[k.Assoc]
	if !ok {
		return fmt.Errorf("%s of id_assoc=%d: no live association to charge it to: left out", what, k.Assoc)
	}
	s := tres[k.TRES]
	if s == nil {
		s = make([]float64, len(in.Tree.Assocs))
		tres[k.TRES] = s
	}
	s[i] += v
	return nil
}

// keepsTRES says whether usage of a TRES is kept: billing, or with all
// every TRES but energy (Cluster.tresCond says the same to the server).
func keepsTRES(id uint32, all bool) bool {
	return id != TRESEnergy && (all || id == TRESBilling || id == tresTailRate || id == tresTailMost || id == tresTailLost)
}

// Charge charges usage and uncharged usage kept per id_assoc to the tree,
// through node (see nodes).
func (in *UsageInputs) Charge(usage map[Key]float64, uncharged map[uint32]float64, node map[uint32]int) *Charged {
	n := len(in.Tree.Assocs)
	c := &Charged{TRES: map[uint32][]float64{TRESBilling: make([]float64, n)}, Uncharged: make([]float64, n)}
	for k, v := range usage {
		if err := in.chargeTo(c.TRES, node, k, v, "usage"); err != nil {
			c.Problems = append(c.Problems, err)
		}
	}
	for id, v := range uncharged {
		if i, ok := node[id]; ok {
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
	// billing alone without UsageInputs.AllTRES):
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
}

// TailRisk: see Usage.TailRisk and tresTailRate.
type TailRisk struct {
	Rate, Most, Lost []float64
}

// maxUnits bounds the units of one TRES an association can hold at once
// (2^40: a trillion CPUs, MB or billing units); alloc_secs beyond it over
// a whole period is a corrupt row, not usage.
const maxUnits = 1 << 40

// periodSeconds is the longest a rollup period can be (a day with a DST
// change, a 31-day month).
var periodSeconds = map[Period]float64{Hour: 3600, Day: 25 * 3600, Month: 31 * 86400}

// RawUsage rebuilds every tree association's decayed usage at At, the way
// slurmctld accumulates it: rolled-up alloc_secs (finest table first)
// spread evenly over their period, plus the jobs of the time after the last
// hourly rollup charged pass by pass with their QOS UsageFactor. Usage of a
// removed user association stays with its account (Slurm 22.05+
// leaf_usage); accounts and root hold the sum of their subtree. Rows that
// cannot be placed are reported, not fatal.
func RawUsage(in UsageInputs) (u Usage, problems []error) {
	n := len(in.Tree.Assocs)
	node := in.Node
	if node == nil {
		node = nodes(in.Rows, in.Tree)
	}
	base, scale := in.Charged, in.BaseScale
	if base == nil {
		base, scale = in.Charge(in.Base, in.BaseUncharged, node), 1
	}
	problems = append(problems, base.Problems...)
	u.TRES = make(map[uint32][]float64, len(base.TRES))
	for id, s := range base.TRES {
		u.TRES[id] = scaled(s, scale)
	}
	u.Uncharged = scaled(base.Uncharged, scale)
	add := func(k Key, v float64, what string) {
		if err := in.chargeTo(u.TRES, node, k, v, what); err != nil {
			problems = append(problems, err)
		}
	}
	for _, b := range []struct {
		rows []UsageRow
		p    Period
	}{{in.Hours, Hour}, {in.Days, Day}, {in.Months, Month}} {
		for _, r := range b.rows {
			what := string(b.p) + "ly usage"
			if most := periodSeconds[b.p] * maxUnits; r.AllocSecs > most {
				problems = append(problems, fmt.Errorf("%s of id_assoc=%d id_tres=%d time_start=%d: alloc_secs %.0f: expected at most %.0f (2^40 units for a whole %s): left out",
					what, r.Assoc, r.TRES, r.Start, r.AllocSecs, most, b.p))
				continue
			}
			add(Key{r.Assoc, r.TRES}, in.bucket(r, b.p), what)
		}
	}

	jobsFrom := max(float64(in.LastRan.Hourly), in.Since)
	for _, j := range in.Jobs {
		i, ok := node[j.Assoc]
		if !ok {
			problems = append(problems, fmt.Errorf("job_db_inx=%d of id_assoc=%d: no live association to charge it to: left out", j.Inx, j.Assoc))
			continue
		}
		per, billing, err := in.jobTRES(j)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		// Usage is linear in the count: one walk over the passes per job,
		// plus its seconds before the rollup at their own time.
		w := in.Passes.JobUsage(max(float64(j.Start), jobsFrom), float64(j.End), in.At, 1) + in.retime(j)
		for _, c := range per {
			add(Key{j.Assoc, c.id}, w*c.per, "")
		}
		u.Uncharged[i] += in.tail(j, jobsFrom) * billing
		rate, most, lost := in.tailRisk(j, jobsFrom)
		add(Key{j.Assoc, tresTailRate}, rate*billing, "")
		add(Key{j.Assoc, tresTailMost}, most*billing, "")
		add(Key{j.Assoc, tresTailLost}, lost*billing, "")
	}
	u.Running = make([]float64, n)
	for _, jobs := range [][]Job{in.Jobs, in.Ended} {
		for _, j := range jobs {
			if !in.ranWithinPeriod(j) {
				continue
			}
			if i, ok := node[j.Assoc]; ok {
				if _, billing, err := in.jobTRES(j); err == nil {
					u.Running[i] += billing
				}
			}
		}
	}
	usage, uncharged, endedProblems := in.Tails(in.Ended, true)
	problems = append(problems, endedProblems...)
	for k, v := range usage {
		add(k, v, "finished jobs' usage")
	}
	for id, v := range uncharged {
		if i, ok := node[id]; ok {
			u.Uncharged[i] += v
		}
	}

	for id, s := range u.TRES {
		problems = append(problems, clampTails(s, id, in.Tree)...)
	}
	// Subtree sums: parents come first, so walk backwards.
	for _, s := range u.TRES {
		for i := n - 1; i > 0; i-- {
			s[in.Tree.Assocs[i].Parent] += s[i]
		}
	}
	for i := n - 1; i > 0; i-- {
		u.Uncharged[in.Tree.Assocs[i].Parent] += u.Uncharged[i]
		u.Running[in.Tree.Assocs[i].Parent] += u.Running[i]
	}
	u.Raw = u.TRES[TRESBilling]
	u.TailRisk = TailRisk{Rate: u.TRES[tresTailRate], Most: u.TRES[tresTailMost], Lost: u.TRES[tresTailLost]}
	delete(u.TRES, tresTailRate)
	delete(u.TRES, tresTailMost)
	delete(u.TRES, tresTailLost)
	if u.TailRisk.Rate == nil {
		u.TailRisk.Rate, u.TailRisk.Most = make([]float64, n), make([]float64, n)
	}
	if u.TailRisk.Lost == nil {
		u.TailRisk.Lost = make([]float64, n)
	}
	return u, problems
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
func clampTails(s []float64, id uint32, t *Tree) (problems []error) {
	for i, v := range s {
		if v >= 0 {
			continue
		}
		if v < -tailSlack {
			a := t.Assocs[i]
			problems = append(problems, fmt.Errorf("usage of id_tres=%d of account=%q user=%q is %g after taking out finished jobs' uncharged tails: the job records and rollups disagree: counted as 0", id, a.Account, a.User, v))
		}
		s[i] = 0
	}
	return problems
}

// tresCharge is what a job charges per second of one TRES.
type tresCharge struct {
	id  uint32
	per float64
}

// jobTRES is what a job charges per second: each TRES count but energy
// times its QOS UsageFactor, and billing alone (the CPUs when the job
// recorded no billing, as slurmctld bills them).
func (in *UsageInputs) jobTRES(j Job) (per []tresCharge, billing float64, err error) {
	counts, err := TRESCounts(j.TRESAlloc)
	if err != nil {
		return nil, 0, fmt.Errorf("job_db_inx=%d: %w: left out", j.Inx, err)
	}
	uf := 1.0
	if q, ok := in.QOS[j.QOS]; ok && q.UsageFactor >= 0 {
		uf = q.UsageFactor
	}
	billing = -1
	for _, c := range counts {
		if c[0] == TRESEnergy || c[1] == 0 {
			continue
		}
		if c[0] == TRESBilling {
			billing = float64(c[1]) * uf
		}
		per = append(per, tresCharge{uint32(c[0]), float64(c[1]) * uf})
	}
	if billing < 0 {
		cpus, _, _ := TRESCount(j.TRESAlloc, 1)
		billing = float64(cpus) * uf
		per = append(per, tresCharge{TRESBilling, billing})
	}
	return per, billing, nil
}

// Tails takes finished jobs' uncharged last intervals (tail) out of the
// rolled-up usage, which counts them: the (negative) usage per id_assoc
// and TRES, and the uncharged billing usage per id_assoc. With retimed,
// the usage also moves their seconds in partial hours to their own time
// (see retime).
func (in *UsageInputs) Tails(jobs []Job, retimed bool) (usage map[Key]float64, uncharged map[uint32]float64, problems []error) {
	usage, uncharged = map[Key]float64{}, map[uint32]float64{}
	for _, j := range jobs {
		t, r := in.tail(j, in.Since), 0.0
		if retimed {
			r = in.retime(j)
		}
		rate, most, lost := in.tailRisk(j, in.Since)
		if t == 0 && r == 0 && rate == 0 {
			continue
		}
		per, billing, err := in.jobTRES(j)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		for _, c := range per {
			usage[Key{j.Assoc, c.id}] += (r - t) * c.per
		}
		if t != 0 {
			uncharged[j.Assoc] += t * billing
		}
		usage[Key{j.Assoc, tresTailRate}] += rate * billing
		usage[Key{j.Assoc, tresTailMost}] += most * billing
		usage[Key{j.Assoc, tresTailLost}] += lost * billing
	}
	return usage, uncharged, problems
}

// tailRisk is j's part of TailRisk per unit of billing (0 for a running
// job, or when slurmctld charges the tail at the job's end).
func (in *UsageInputs) tailRisk(j Job, from float64) (rate, most, lost float64) {
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
func (in *UsageInputs) ranWithinPeriod(j Job) bool {
	return j.Start > 0 && float64(j.Start) < in.At && (j.End == 0 || float64(j.End) > in.At-in.Passes.Period)
}

// tail is the decayed usage per unit of count that slurmctld never charges
// of a finished job: from the last pass before its end (or its start,
// whichever is later, but not before from) to its end, unless
// AccountingStorageEnforce=limits charges it at the end.
func (in *UsageInputs) tail(j Job, from float64) float64 {
	if in.Passes.ChargeJobEnd || j.End == 0 {
		return 0
	}
	end := float64(j.End)
	start := max(float64(j.Start), from, in.Passes.LastPass(end))
	return in.Passes.BucketUsage(start, end, in.At, end-start)
}

// bucket is a rollup row's decayed contribution at At: spread evenly over
// its hour, day or month (local days and months, as slurmdbd rolls them),
// cut at the last hourly rollup and at the last reset.
func (in *UsageInputs) bucket(u UsageRow, p Period) float64 {
	return u.AllocSecs * in.cachedWeight(u.Start, p)
}

func (in *UsageInputs) cachedWeight(start int64, p Period) float64 {
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
// started in, the hour it ended in) weigh at their own time rather than
// spread over the hour with the rest of the row, per unit of count. A
// full hour of the job is its row's spread already. Without it, right
// after each rollup the minutes a running job had before it weighed as
// if at the middle of the hour: with a one-hour half-life a quarter less
// than slurmctld charged (TestRetimedPartialHours). Hours before
// HoursFrom are frozen as spread: by then the difference is at most
// 0.35·3600/HalfLife of an hour's usage, decayed by the six hours of
// DefaultReread.
func (in *UsageInputs) retime(j Job) float64 {
	start, end := float64(j.Start), float64(in.LastRan.Hourly)
	if j.End != 0 {
		end = min(end, float64(j.End))
	}
	if end <= start {
		return 0
	}
	first := in.hourOf(j.Start)
	r := in.retimeHour(first, start, end)
	if last := in.hourOf(int64(math.Ceil(end)) - 1); last != first {
		r += in.retimeHour(last, start, end)
	}
	return r
}

// retimeHour is retime for the part of [start, end) in the rolled-up hour
// beginning at h.
func (in *UsageInputs) retimeHour(h int64, start, end float64) float64 {
	if float64(h) < in.HoursFrom {
		return 0
	}
	from, to := max(start, float64(h)), min(end, float64(h)+3600, float64(in.LastRan.Hourly))
	if to <= from {
		return 0
	}
	own := 0.0
	if at := max(from, in.Since); to > at {
		own = in.Passes.BucketUsage(at, to, in.At, to-at) // one job alone in the bucket
	}
	return own - (to-from)*in.cachedWeight(h, Hour)
}

// hourOf is hourStart in in.Location.
func (in *UsageInputs) hourOf(t int64) int64 {
	loc := in.Location
	if loc == nil {
		loc = time.Local
	}
	return hourStart(t, loc)
}

// hourStart is the start of the local hour holding t, as slurmdbd rolls
// hours (a zone may be half an hour off UTC).
func hourStart(t int64, loc *time.Location) int64 {
	_, off := time.Unix(t, 0).In(loc).Zone()
	return t - ((t+int64(off))%3600+3600)%3600
}

// periodEnd is the end of the hour, local day or local month starting at
// start.
func periodEnd(start int64, p Period, loc *time.Location) int64 {
	switch p {
	case Day:
		return time.Unix(start, 0).In(loc).AddDate(0, 0, 1).Unix()
	case Month:
		return time.Unix(start, 0).In(loc).AddDate(0, 1, 0).Unix()
	}
	return start + 3600
}

// weight is what one alloc_sec of a row starting at start weighs at At
// (BucketUsage is linear in the amount): the row's usage spread evenly over
// its period, of which only the part after the reset and before the last
// rollup counts. A rolled-up period has ended by the last rollup, but not
// by the moment of check --at, whose last rollup is as of then
// (LastRan.asOf).
func (in *UsageInputs) weight(start int64, p Period) float64 {
	loc := in.Location
	if loc == nil {
		loc = time.Local
	}
	from, to := float64(start), float64(periodEnd(start, p, loc))
	lo, hi := max(from, in.Since), min(to, float64(in.LastRan.Hourly))
	if hi <= lo {
		return 0
	}
	return in.Passes.BucketUsage(lo, hi, in.At, (hi-lo)/(to-from))
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

func scaled(s []float64, k float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = v * k
	}
	return out
}
