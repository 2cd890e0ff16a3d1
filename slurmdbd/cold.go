package slurmdbd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A cold load reads a year of hourly rollups at 100k associations: tens
// of millions of rows, too many to send to the exporter. So it reads each
// part of the history from the coarsest table precise enough for it, and
// lets the server sum the rows:
//
//   - hours younger than hourHalfLives half-lives, each weighed exactly as
//     bucket() weighs it (the weight of a whole hour is K·d^(now−start),
//     with K fixed by the hour's phase against the passes);
//   - days younger than dayHalfLives, and months before, each weighed as
//     usage spread evenly over the period. Where in the period the usage
//     fell is unknown, so each coarse sum carries a bound on its error;
//   - an association whose bound exceeds coarseTolerance of its usage
//     (a user idle for weeks, whose usage is all old) is read again from
//     the hours the table still holds.
//
// With decay off (half-life 0) coarse periods are exact and the whole
// history comes from months and days.
const (
	hourHalfLives = 7
	dayHalfLives  = 12
	// coarseTolerance is the relative error a coarse period may add to an
	// association's usage: a fifth of the default usage drift tolerance.
	coarseTolerance = 1e-3
	// coarseFloor is an absolute error always allowed (billing-seconds):
	// sshare prints RawUsage as an integer.
	coarseFloor = 1
)

// coldSum is Σ alloc_secs·d^(now−time_start) of one association's TRES
// over rows of one table, and for hours the phase of their start against
// the passes.
type coldSum struct {
	Key
	phase int64 // (time_start − pass phase) mod period; hours only
	sum   float64
}

// keys are what a cold load sums by primary key (id, id_tres,
// time_start): every association id of the cluster and the TRES of
// tres_table it keeps (keepsTRES). 22.05's time_start index makes the
// server fetch each row at random; by key prefix it reads them in order,
// twice as fast, and 24.11+ has no time_start index at all.
type keys struct {
	ids  []uint32
	tres []uint32
}

// coldWorkers is how many queries a cold load runs at once (the pool's
// four connections). On a warm buffer pool the server sums on one core
// each; on a cold one each query waits on one page read after another, and
// the disk serves more at once: at 100k associations, a year, a cold pool
// (4.3 GB read) took 30-34 s to the first factors with two, 21-22 s with
// four and 20 s with eight; a warm one 8-9 s with two or four.
const coldWorkers = 4

// sums reads coldSums of period p over [from, to) for the ids and TRES of
// k. Rows of another TRES or association, and rows whose alloc_secs no
// association could reach (maxUnits), are left out: bad rows, which the
// steady refresh names while they are recent. With QOS UsageFactor
// to apply (24.11+ per-QOS tables) the rows are read and weighed here;
// otherwise the server sums them.
func (r *Refresher) sums(ctx context.Context, l Layout, qos map[uint32]QOS, p Period, now float64, from, to int64, k keys) ([]coldSum, error) {
	if to <= from || len(k.ids) == 0 || len(k.tres) == 0 {
		return nil, nil
	}
	lnD := math.Log(r.Passes.D())
	// Rows are weighed from ref, at or after every one of them, then
	// scaled to now: the server's exponents are never positive, where rows
	// after now would overflow EXP (a DOUBLE ends at e^709: rows 43 days
	// after now at a one-hour half-life).
	ref := max(now, float64(to))
	scale := math.Exp(lnD * (now - ref))
	period, phase := r.passGrid()
	most := periodSeconds[p] * maxUnits
	if l.QOSUsage && anyFactor(qos) {
		rows, err := r.Cluster.Usage(ctx, l, qos, p, from, to)
		if err != nil {
			return nil, err
		}
		keep := idSet(k.ids)
		idx := map[coldSum]int{}
		var out []coldSum
		for _, u := range rows {
			if !keep[u.Assoc] || u.AllocSecs > most {
				continue
			}
			key := coldSum{Key: Key{u.Assoc, u.TRES}}
			if p == Hour {
				key.phase = mod(u.Start-phase, period)
			}
			i, ok := idx[key]
			if !ok {
				i = len(out)
				idx[key] = i
				out = append(out, key)
			}
			out[i].sum += u.AllocSecs * math.Exp(lnD*(ref-float64(u.Start))) * scale
		}
		return out, nil
	}
	table := r.Cluster.table("assoc_usage_" + string(p) + "_table")
	phaseCol := "0"
	if p == Hour {
		phaseCol = "MOD(CAST(time_start AS SIGNED) - " + strconv.FormatInt(phase, 10) + ", " + strconv.FormatInt(period, 10) + ")"
	}
	sel := "SELECT id, id_tres, " + phaseCol + " AS ph, SUM(alloc_secs * EXP(? * (? - CAST(time_start AS SIGNED)))) FROM " + table
	// deleted rows included: see Refresher.hours
	where := " time_start >= ? AND time_start < ? AND alloc_secs <= ? GROUP BY id, id_tres, ph"
	var queries []string
	// below 1000 values: MariaDB turns longer IN lists into a temporary
	// table and scans
	for chunk := range slices.Chunk(k.ids, 999) {
		queries = append(queries, sel+" WHERE id IN ("+joinIDs(chunk)+") AND id_tres IN ("+joinIDs(k.tres)+") AND"+where)
	}
	var (
		mu   sync.Mutex
		out  []coldSum
		errs = make([]error, len(queries))
		next = make(chan int)
		wg   sync.WaitGroup
	)
	for range coldWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var part []coldSum
				errs[i] = r.Cluster.db.query(ctx, "summing "+table, queries[i], func(rows *sql.Rows) error {
					var s coldSum
					if err := rows.Scan(&s.Assoc, &s.TRES, &s.phase, &s.sum); err != nil {
						return err
					}
					s.phase, s.sum = mod(s.phase, period), s.sum*scale
					part = append(part, s)
					return nil
				}, lnD, ref, from, to, uint64(most))
				mu.Lock()
				out = append(out, part...)
				mu.Unlock()
			}
		}()
	}
	for i := range queries {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

// passGrid is the pass period and phase in whole seconds.
func (r *Refresher) passGrid() (period, phase int64) {
	period = max(1, int64(math.Round(r.Passes.Period)))
	return period, mod(int64(math.Round(r.Passes.Phase)), period)
}

// hourWeight is K of an hour whose start has this phase: bucket() of a
// whole hour is alloc·K·d^(now−start).
func (r *Refresher) hourWeight(phase int64, now float64) float64 {
	period, p0 := r.passGrid()
	// any start with this phase, a day before now
	s := int64(now) - 86400
	s -= mod(s-p0-phase, period)
	return r.Passes.BucketUsage(float64(s), float64(s+3600), now, 1) / math.Pow(r.Passes.D(), now-float64(s))
}

// spread is, for usage spread evenly over a period of nominal length
// (seconds) starting at s, the factor A with value = alloc·A·d^(now−s),
// and the largest error of that value over any placement of the usage in
// a period up to longest seconds, per unit of alloc·d^(now−s).
func (r *Refresher) spread(nominal, longest float64) (a, bound float64) {
	d := r.Passes.D()
	if d == 1 {
		return 1, 0
	}
	lnD := math.Log(d)
	a = (math.Exp(-lnD*nominal) - 1) / (-lnD * nominal)
	// a second is weighed at least d^P (charged at the next pass) and at
	// most d^(−longest) (the end of the period)
	return a, math.Max(a-math.Pow(d, r.Passes.Period), math.Exp(-lnD*longest)-a)
}

// coldLoad fills frozen with every rolled-up row before to, from
// the horizon from (see the comment at the top of this file). hourCut and
// dayCut are where the hour and day tables start holding data (purges);
// problems say where coarser rows stood in for purged ones up to the last
// rollup, and how far off that may be.
func (r *Refresher) coldLoad(ctx context.Context, in *UsageInputs, frozen map[Key]float64, l Layout, qos map[uint32]QOS, tres map[uint32]string, from, to, hourCut, dayCut int64, loc *time.Location) (problems []error, err error) {
	c := r.Cluster
	now := r.Passes.LastPass(in.At)
	// tier boundaries by age, at local day and month starts (without
	// decay every period is exact: days and months up to today)
	hl := r.Passes.HalfLife
	hourFrom := startOf(int64(in.At-hourHalfLives*hl), loc, false)
	dayFrom := startOf(int64(in.At-dayHalfLives*hl), loc, true)
	// a day (month) row lies wholly before hourFrom (dayFrom): the hours
	// after it are read as hours
	hourFrom = min(max(hourFrom, hourCut, from), startOf(to, loc, false))
	dayFrom = min(max(dayFrom, dayCut, from), startOf(hourFrom, loc, true))
	hourFrom = max(hourFrom, from)
	dayFrom = max(dayFrom, from)
	// Rows that straddle the last usage reset are cut by bucket(): read
	// them one by one.
	since := int64(in.Since)
	straddle := func(p Period, lo, hi int64) (int64, error) {
		long := int64(periodSeconds[p])
		if since == 0 || since <= lo-long || lo >= hi {
			return lo, nil
		}
		rows, err := c.Usage(ctx, l, qos, p, lo-long, min(since, hi))
		if err != nil {
			return 0, err
		}
		for _, u := range rows {
			frozen[Key{u.Assoc, u.TRES}] += in.bucket(u, p)
		}
		return min(max(lo, since), hi), nil
	}

	all := keys{}
	for id := range tres {
		if keepsTRES(id, c.AllTRES) {
			all.tres = append(all.tres, id)
		}
	}
	slices.Sort(all.tres)
	for _, a := range in.Rows {
		all.ids = append(all.ids, a.ID)
	}
	slices.Sort(all.ids)
	all.ids = slices.Compact(all.ids)

	// hours: exact
	weights := map[int64]float64{}
	weigh := func(s coldSum) float64 {
		k, ok := weights[s.phase]
		if !ok {
			k = r.hourWeight(s.phase, now)
			weights[s.phase] = k
		}
		return s.sum * k
	}
	lo, err := straddle(Hour, hourFrom, to)
	if err != nil {
		return nil, err
	}
	hours, err := r.sums(ctx, l, qos, Hour, now, lo, to, all)
	if err != nil {
		return nil, err
	}
	for _, s := range hours {
		frozen[s.Key] += weigh(s)
	}

	// A moment older than PurgeUsageAfter (check --at): the day (month)
	// tier stops at the start of the day (month) holding to, and no finer
	// rows are left from there to the last rollup. The coarser rows stand
	// in for them, each weighed alone (bucket): the one holding the last
	// rollup cannot be counted whole, and is taken as spread evenly over
	// its period up to it.
	for _, g := range []struct {
		p, finer Period
		lo, cut  int64
	}{{Month, Day, dayFrom, min(dayCut, startOf(hourCut, loc, true))}, {Day, Hour, hourFrom, hourCut}} {
		hi := min(g.cut, in.LastRan.Hourly)
		if g.lo >= hi {
			continue
		}
		rows, err := c.Usage(ctx, l, qos, g.p, g.lo, hi)
		if err != nil {
			return nil, err
		}
		straddling, n := 0.0, 0
		for _, u := range rows {
			frozen[Key{u.Assoc, u.TRES}] += in.bucket(u, g.p)
			if periodEnd(u.Start, g.p, loc) > in.LastRan.Hourly && u.TRES == TRESBilling {
				straddling += u.AllocSecs
				n++
			}
		}
		if n > 0 {
			problems = append(problems, fmt.Errorf("usage at %s: %s holds no rows before %s (PurgeUsageAfter): the %d %s rows across %s are taken as spread evenly over their %s, off by up to %.0f billing-seconds",
				time.Unix(int64(in.At), 0).In(loc).Format(time.RFC3339), c.table("assoc_usage_"+string(g.finer)+"_table"), time.Unix(g.cut, 0).In(loc).Format(time.DateOnly),
				n, g.p, time.Unix(in.LastRan.Hourly, 0).In(loc).Format(time.RFC3339), g.p, straddling))
		}
	}

	// Days and months: spread evenly, with a bound. A month that the day
	// table covers, or a day or month that the hour table covers, can be
	// read again from the finer table.
	spread := map[Period][2]float64{}
	for p, nominal := range map[Period]float64{Day: 86400, Month: 30.44 * 86400} {
		a, b := r.spread(nominal, periodSeconds[p])
		spread[p] = [2]float64{a, b}
	}
	type coarse struct{ fixed, refinable, bound float64 }
	acc := map[Key]*coarse{}
	type finer struct {
		p      Period
		lo, hi int64
	}
	var again []finer
	alignUp := func(t int64, p Period) int64 {
		if s := startOf(t, loc, p == Month); s != t {
			return periodEnd(s, p, loc)
		}
		return t
	}
	for _, t := range []struct {
		p      Period
		lo, hi int64
	}{{Month, from, dayFrom}, {Day, dayFrom, hourFrom}} {
		lo, err := straddle(t.p, t.lo, t.hi)
		if err != nil {
			return nil, err
		}
		// [lo, viaDays): no finer data; [viaDays, viaHours): days;
		// [viaHours, hi): hours
		viaHours := min(max(lo, alignUp(hourCut, t.p)), t.hi)
		viaDays := viaHours
		if t.p == Month {
			viaDays = min(max(lo, alignUp(dayCut, Month)), viaHours)
			again = append(again, finer{Day, viaDays, viaHours})
		}
		again = append(again, finer{Hour, viaHours, t.hi})
		for _, part := range [][2]int64{{lo, viaDays}, {viaDays, t.hi}} {
			sums, err := r.sums(ctx, l, qos, t.p, now, part[0], part[1], all)
			if err != nil {
				return nil, err
			}
			for _, s := range sums {
				e := acc[s.Key]
				if e == nil {
					e = &coarse{}
					acc[s.Key] = e
				}
				if part[0] == viaDays {
					e.refinable += s.sum * spread[t.p][0]
				} else {
					e.fixed += s.sum * spread[t.p][0]
				}
				e.bound += s.sum * spread[t.p][1]
			}
		}
	}
	var refine []uint32
	refined := map[uint32]bool{}
	for k, e := range acc {
		total := frozen[k] + e.fixed + e.refinable
		if e.refinable > 0 && e.bound > coarseTolerance*total+coarseFloor && !refined[k.Assoc] {
			refined[k.Assoc] = true
			refine = append(refine, k.Assoc)
		}
	}
	r.Refined = len(refine)
	for _, f := range again {
		if len(refine) == 0 || f.lo >= f.hi {
			continue
		}
		sums, err := r.sums(ctx, l, qos, f.p, now, f.lo, f.hi, keys{ids: refine, tres: all.tres})
		if err != nil {
			return nil, err
		}
		for _, s := range sums {
			if f.p == Hour {
				frozen[s.Key] += weigh(s)
			} else {
				frozen[s.Key] += s.sum * spread[f.p][0]
			}
		}
	}
	for k, e := range acc {
		frozen[k] += e.fixed
		if !refined[k.Assoc] {
			frozen[k] += e.refinable
		}
	}
	return problems, nil
}

func mod(a, m int64) int64 { return ((a % m) + m) % m }

func idSet(ids []uint32) map[uint32]bool {
	m := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func joinIDs(ids []uint32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	return b.String()
}
