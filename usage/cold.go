package usage

import (
	"math"
	"slices"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// horizonHalfLives is how far back usage is read: 40 half-lives weigh
// 2^-40, below a millionth of a billing-second per day of a full cluster.
const horizonHalfLives = 40

// tailHalfLives is how far back finished jobs are read for their uncharged
// last intervals: a tail is at most one PriorityCalcPeriod of a job, and
// 2^-10 of it is below the usage tolerance.
const tailHalfLives = 10

// Horizon is where a refresh at at (unix seconds) reads history from:
// rollup rows from the hour holding the oldest moment that still weighs,
// or the last usage reset since (0: none), whichever is later (Bucket
// keeps the part after a reset); finished jobs' tails from a younger
// moment, older tails weighing below 2^-tailHalfLives.
func Horizon(p fairshare.Passes, at, since int64) (rows, tails int64) {
	if p.HalfLife > 0 {
		rows = at - int64(horizonHalfLives*p.HalfLife)
	}
	rows = max(0, max(rows, since)-3600)
	tails = rows
	if p.HalfLife > 0 {
		tails = max(rows, at-int64(tailHalfLives*p.HalfLife))
	}
	return rows, tails
}

// A cold load reads a year of hourly rollups at 100k associations: tens
// of millions of rows, too many to send to the exporter. So it reads each
// part of the history from the coarsest table precise enough for it, and
// lets the server sum the rows:
//
//   - hours younger than hourHalfLives half-lives, each weighed exactly as
//     Bucket weighs it (the weight of a whole hour is K·d^(now−start),
//     with K fixed by the hour's phase against the passes);
//   - days younger than dayHalfLives, and months before, each weighed as
//     usage spread evenly over the period. Where in the period the usage
//     fell is unknown, so each coarse sum carries a bound on its error;
//   - an association whose bound exceeds CoarseTolerance of its usage
//     (a user idle for weeks, whose usage is all old) is read again from
//     the hours the table still holds.
//
// With decay off (half-life 0) coarse periods are exact and the whole
// history comes from months and days. Cold is that arithmetic; slurmdbd's
// Refresher.coldLoad reads the sums it asks for.
const (
	hourHalfLives = 7
	dayHalfLives  = 12
	// CoarseTolerance is the relative error a coarse period may add to an
	// association's usage: a fifth of the default usage drift tolerance.
	CoarseTolerance = 1e-3
	// CoarseFloor is an absolute error always allowed (billing-seconds):
	// sshare prints RawUsage as an integer.
	CoarseFloor = 1
)

// ColdSum is Σ alloc_secs·d^(now−time_start) of one association's TRES
// over rows of one table, and for hours the phase of their start against
// the passes.
type ColdSum struct {
	Key
	Phase int64 // (time_start − pass phase) mod period; hours only
	Sum   float64
}

// Span is the rows of a rollup table with Lo <= time_start < Hi.
type Span struct {
	P      Period
	Lo, Hi int64
}

// ColdRange is what a cold load covers: rows from From (the horizon) to
// To (the watermark); the hour and day tables hold data from HourCut and
// DayCut on (PurgeUsageAfter).
type ColdRange struct {
	From, To, HourCut, DayCut int64
}

// Cold is a cold load's arithmetic: which table each part of the history
// is read from, and the frozen sums made of what was read. Its methods
// are called in the order of the load: AddRows for the rows straddling a
// reset (Straddling), AddHours, AddPurged, AddCoarse over Parts, Refine,
// AddRefined over Again, then Finish.
type Cold struct {
	in *Inputs
	ColdRange
	// Now is the pass the sums are decayed to.
	Now float64
	// HourFrom and DayFrom are the tier boundaries by age, at local day
	// and month starts.
	HourFrom, DayFrom int64
	frozen            Frozen
	// hourK is hourWeight by phase; spread the factor and bound of a day
	// and a month.
	hourK   map[int64]float64
	spread  map[Period][2]float64
	acc     map[Key]*coarse
	again   []Span
	refined map[uint32]bool
}

// coarse is an association's usage of one TRES from coarse periods: the
// part no finer table holds, the part one does, and the bound of both.
type coarse struct{ fixed, refinable, bound float64 }

// NewCold plans a cold load at in.At over r, weighing rows as in does.
func NewCold(in *Inputs, r ColdRange) *Cold {
	c := &Cold{in: in, ColdRange: r, Now: in.Passes.LastPass(in.At), hourK: map[int64]float64{}, acc: map[Key]*coarse{}, refined: map[uint32]bool{}}
	c.frozen = NewFrozen(c.Now)
	// without decay every period is exact: days and months up to today
	loc, hl := in.location(), in.Passes.HalfLife
	hourFrom := Day.Start(int64(in.At-hourHalfLives*hl), loc)
	dayFrom := Month.Start(int64(in.At-dayHalfLives*hl), loc)
	// a day (month) row lies wholly before hourFrom (dayFrom): the hours
	// after it are read as hours
	hourFrom = min(max(hourFrom, r.HourCut, r.From), Day.Start(r.To, loc))
	dayFrom = min(max(dayFrom, r.DayCut, r.From), Month.Start(hourFrom, loc))
	c.HourFrom, c.DayFrom = max(hourFrom, r.From), max(dayFrom, r.From)
	c.spread = map[Period][2]float64{}
	for p, nominal := range map[Period]float64{Day: 86400, Month: 30.44 * 86400} {
		a, b := c.spreadOver(nominal, p.Longest())
		c.spread[p] = [2]float64{a, b}
	}
	return c
}

// Straddling: rows that straddle the last usage reset are cut by Bucket,
// so the rows of p before it, down to lo less a period, are read one by
// one (read) and given to AddRows; the tier [lo, hi) goes on from next.
// ok is false when no row straddles it.
func (c *Cold) Straddling(p Period, lo, hi int64) (read Span, next int64, ok bool) {
	since, long := int64(c.in.Since), int64(p.Longest())
	if since == 0 || since <= lo-long || lo >= hi {
		return Span{}, lo, false
	}
	return Span{p, lo - long, min(since, hi)}, min(max(lo, since), hi), true
}

// AddRows adds rows weighed one by one (Bucket).
func (c *Cold) AddRows(rows []Row, p Period) { c.frozen.AddRows(c.in, rows, p) }

// Hours is the span read as hours, exact, from lo (after Straddling).
func (c *Cold) Hours(lo int64) Span { return Span{Hour, lo, c.To} }

// AddHours adds sums of hours, each weighed exactly.
func (c *Cold) AddHours(sums []ColdSum) {
	for _, s := range sums {
		c.frozen.Usage[s.Key] += c.weigh(s)
	}
}

func (c *Cold) weigh(s ColdSum) float64 {
	k, ok := c.hourK[s.Phase]
	if !ok {
		k = c.hourWeight(s.Phase)
		c.hourK[s.Phase] = k
	}
	return s.Sum * k
}

// Purged is a span of coarser rows standing in for finer ones a purge
// removed: the finer table holds no rows before Cut.
type Purged struct {
	Span
	Finer Period
	Cut   int64
}

// Purged are the spans where, at a moment older than PurgeUsageAfter
// (check --at), the day (month) tier stops at the start of the day (month)
// holding To, and no finer rows are left from there to the last rollup.
// The coarser rows stand in for them, each weighed alone (AddPurged).
func (c *Cold) Purged() []Purged {
	var out []Purged
	for _, g := range []Purged{
		{Span{Month, c.DayFrom, 0}, Day, min(c.DayCut, Month.Start(c.HourCut, c.in.location()))},
		{Span{Day, c.HourFrom, 0}, Hour, c.HourCut},
	} {
		if g.Hi = min(g.Cut, c.in.LastHourly); g.Lo < g.Hi {
			out = append(out, g)
		}
	}
	return out
}

// AddPurged adds the rows of a Purged span, each weighed alone (Bucket).
// The one holding the last rollup cannot be counted whole, and is taken
// as spread evenly over its period up to it: n is how many such rows of
// billing there are, and alloc their alloc_secs, which that may be off by.
func (c *Cold) AddPurged(rows []Row, p Period) (n int, alloc float64) {
	c.AddRows(rows, p)
	for _, u := range rows {
		if p.End(u.Start, c.in.location()) > c.in.LastHourly && u.TRES == TRESBilling {
			alloc += u.AllocSecs
			n++
		}
	}
	return n, alloc
}

// Coarse are the tiers of days and months, spread evenly with a bound.
func (c *Cold) Coarse() []Span {
	return []Span{{Month, c.From, c.DayFrom}, {Day, c.DayFrom, c.HourFrom}}
}

// Parts splits a coarse tier, from lo on (after Straddling), in the part
// no finer table holds and the part one does, whose rows can be read
// again from the finer table (Again).
func (c *Cold) Parts(t Span, lo int64) (fixed, refinable Span) {
	loc := c.in.location()
	alignUp := func(t int64, p Period) int64 {
		if s := p.Start(t, loc); s != t {
			return p.End(s, loc)
		}
		return t
	}
	// [lo, viaDays): no finer data; [viaDays, viaHours): days;
	// [viaHours, hi): hours
	viaHours := min(max(lo, alignUp(c.HourCut, t.P)), t.Hi)
	viaDays := viaHours
	if t.P == Month {
		viaDays = min(max(lo, alignUp(c.DayCut, Month)), viaHours)
		c.again = append(c.again, Span{Day, viaDays, viaHours})
	}
	c.again = append(c.again, Span{Hour, viaHours, t.Hi})
	return Span{t.P, lo, viaDays}, Span{t.P, viaDays, t.Hi}
}

// AddCoarse adds the sums of a Parts span, spread evenly with a bound.
func (c *Cold) AddCoarse(sums []ColdSum, p Period, refinable bool) {
	a, b := c.spread[p][0], c.spread[p][1]
	for _, s := range sums {
		e := c.acc[s.Key]
		if e == nil {
			e = &coarse{}
			c.acc[s.Key] = e
		}
		if refinable {
			e.refinable += s.Sum * a
		} else {
			e.fixed += s.Sum * a
		}
		e.bound += s.Sum * b
	}
}

// Refine is the associations whose coarse bound exceeds CoarseTolerance of
// their usage (and CoarseFloor): their refinable parts are read again from
// the finer tables (Again, AddRefined) instead.
func (c *Cold) Refine() []uint32 {
	var refine []uint32
	for k, e := range c.acc {
		total := c.frozen.Usage[k] + e.fixed + e.refinable
		if e.refinable > 0 && e.bound > CoarseTolerance*total+CoarseFloor && !c.refined[k.Assoc] {
			c.refined[k.Assoc] = true
			refine = append(refine, k.Assoc)
		}
	}
	return refine
}

// Again are the spans of the finer tables that the refinable parts of
// coarse tiers are read again from, for the associations Refine names.
func (c *Cold) Again() []Span {
	return slices.DeleteFunc(slices.Clone(c.again), func(s Span) bool { return s.Lo >= s.Hi })
}

// AddRefined adds the sums of an Again span.
func (c *Cold) AddRefined(sums []ColdSum, p Period) {
	for _, s := range sums {
		if p == Hour {
			c.frozen.Usage[s.Key] += c.weigh(s)
		} else {
			c.frozen.Usage[s.Key] += s.Sum * c.spread[p][0]
		}
	}
}

// Finish adds the coarse sums of the associations not refined and gives
// the frozen sums, decayed to Now.
func (c *Cold) Finish() Frozen {
	for k, e := range c.acc {
		c.frozen.Usage[k] += e.fixed
		if !c.refined[k.Assoc] {
			c.frozen.Usage[k] += e.refinable
		}
	}
	return c.frozen
}

// Weighing is how a cold load's sums of one period's rows before a moment
// are weighed: rows are weighed from Ref, at or after every one of them,
// then scaled to Now: the server's exponents are never positive, where
// rows after now would overflow EXP (a DOUBLE ends at e^709: rows 43 days
// after now at a one-hour half-life).
type Weighing struct {
	// LnD is ln d: a row weighs alloc_secs·e^(LnD·(Ref−time_start)).
	LnD, Ref, scale float64
	// Period and Phase are the pass grid in whole seconds.
	Period, Phase int64
	// Most is the most alloc_secs a row may hold (MostAllocSecs): bad rows
	// beyond it are left out, which the steady refresh names while they
	// are recent.
	Most float64
	hour bool
}

// Weighing weighs the sums of rows of p before to.
func (c *Cold) Weighing(p Period, to int64) Weighing {
	w := Weighing{LnD: math.Log(c.in.Passes.D()), Ref: max(c.Now, float64(to)), Most: p.MostAllocSecs(), hour: p == Hour}
	w.scale = math.Exp(w.LnD * (c.Now - w.Ref))
	w.Period, w.Phase = c.passGrid()
	return w
}

// Scaled is a sum the server made from Ref (its phase, for hours, in
// any residue of Period), scaled to Now.
func (w Weighing) Scaled(s ColdSum) ColdSum {
	s.Phase, s.Sum = mod(s.Phase, w.Period), s.Sum*w.scale
	return s
}

// Sum sums rows here, as the server would: those of the associations in
// keep and within Most, by association, TRES and (hours) phase, in the
// order they come.
func (w Weighing) Sum(rows []Row, keep map[uint32]bool) []ColdSum {
	idx := map[ColdSum]int{}
	var out []ColdSum
	for _, u := range rows {
		if !keep[u.Assoc] || u.AllocSecs > w.Most {
			continue
		}
		key := ColdSum{Key: Key{u.Assoc, u.TRES}}
		if w.hour {
			key.Phase = mod(u.Start-w.Phase, w.Period)
		}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, key)
		}
		out[i].Sum += u.AllocSecs * math.Exp(w.LnD*(w.Ref-float64(u.Start))) * w.scale
	}
	return out
}

// passGrid is the pass period and phase in whole seconds.
func (c *Cold) passGrid() (period, phase int64) {
	period = max(1, int64(math.Round(c.in.Passes.Period)))
	return period, mod(int64(math.Round(c.in.Passes.Phase)), period)
}

// hourWeight is K of an hour whose start has this phase: Bucket of a
// whole hour is alloc·K·d^(now−start).
func (c *Cold) hourWeight(phase int64) float64 {
	period, p0 := c.passGrid()
	p, now := c.in.Passes, c.Now
	// any start with this phase, a day before now
	s := int64(now) - 86400
	s -= mod(s-p0-phase, period)
	return p.BucketUsage(float64(s), float64(s+3600), now, 1) / math.Pow(p.D(), now-float64(s))
}

// spreadOver is, for usage spread evenly over a period of nominal length
// (seconds) starting at s, the factor A with value = alloc·A·d^(now−s),
// and the largest error of that value over any placement of the usage in
// a period up to longest seconds, per unit of alloc·d^(now−s).
func (c *Cold) spreadOver(nominal, longest float64) (a, bound float64) {
	d := c.in.Passes.D()
	if d == 1 {
		return 1, 0
	}
	lnD := math.Log(d)
	a = (math.Exp(-lnD*nominal) - 1) / (-lnD * nominal)
	// a second is weighed at least d^P (charged at the next pass) and at
	// most d^(−longest) (the end of the period)
	return a, math.Max(a-math.Pow(d, c.in.Passes.Period), math.Exp(-lnD*longest)-a)
}

func mod(a, m int64) int64 { return ((a % m) + m) % m }
