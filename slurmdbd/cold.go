package slurmdbd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// A cold load reads each part of the history from the coarsest table
// precise enough for it, and lets the server sum the rows: usage.Cold
// says which and weighs the sums; this file reads them.

// keys are what a cold load sums by primary key (id, id_tres,
// time_start): every association id of the cluster and the TRES of
// tres_table it keeps (usage.KeepsTRES). 22.05's time_start index makes
// the server fetch each row at random; by key prefix it reads them in
// order, twice as fast, and 24.11+ has no time_start index at all.
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

// sqlColdSums sums the rows of a rollup table of period %[2]s
// (rollupTable) by association, TRES and phase %[3]s (coldPhase), each
// weighed alloc_secs·e^(ln d·(ref − time_start)) (args: ln d, ref, from,
// to, the most alloc_secs a row may hold), for the ids %[4]s and TRES
// %[5]s (joinIDs). Deleted rows are included: see sqlChangedHours.
const sqlColdSums = "SELECT `id`, `id_tres`, %[3]s AS ph, SUM(`alloc_secs` * EXP(? * (? - CAST(`time_start` AS SIGNED))))" +
	" FROM `%[1]s_assoc_usage_%[2]s_table` WHERE `id` IN (%[4]s) AND `id_tres` IN (%[5]s)" +
	" AND `time_start` >= ? AND `time_start` < ? AND `alloc_secs` <= ? GROUP BY `id`, `id_tres`, ph"

// sqlHourPhase is the phase of an hour row's start against the passes
// (args: the passes' phase and period, whole seconds), for sqlColdSums.
const sqlHourPhase = "MOD(CAST(`time_start` AS SIGNED) - %d, %d)"

// coldLoad reads f.frozen: every rolled-up row before the watermark, from
// the horizon f.from (usage.Cold). Where coarser rows stood in for purged
// ones up to the last rollup, f.problems say so, and how far off that may
// be.
func (r *Refresher) coldLoad(ctx context.Context, f *refresh) error {
	hourCut, dayCut, err := r.cuts(ctx, f.layout, f.from, f.in.Location)
	if err != nil {
		return err
	}
	cl := usage.NewCold(&f.in, usage.ColdRange{From: f.from, To: f.watermark, HourCut: hourCut, DayCut: dayCut})
	ld := &coldLoader{r: r, f: f, cl: cl, all: allKeys(f.rows, f.names, r.Cluster.AllTRES)}
	// hours: exact
	lo, err := ld.straddle(ctx, usage.Hour, cl.HourFrom, f.watermark)
	if err != nil {
		return err
	}
	hours, err := ld.sums(ctx, cl.Hours(lo), ld.all)
	if err != nil {
		return err
	}
	cl.AddHours(hours)
	if err := ld.purged(ctx); err != nil {
		return err
	}
	if err := ld.coarse(ctx); err != nil {
		return err
	}
	refine := cl.Refine()
	r.Refined = len(refine)
	if len(refine) > 0 {
		for _, s := range cl.Again() {
			sums, err := ld.sums(ctx, s, keys{ids: refine, tres: ld.all.tres})
			if err != nil {
				return err
			}
			cl.AddRefined(sums, s.P)
		}
	}
	f.frozen = cl.Finish()
	return nil
}

// coldLoader reads what a cold load's usage.Cold asks for.
type coldLoader struct {
	r   *Refresher
	f   *refresh
	cl  *usage.Cold
	all keys
}

// allKeys are every association id of rows and the TRES of names that
// are kept.
func allKeys(rows []Assoc, names map[uint32]string, allTRES bool) keys {
	var all keys
	for id := range names {
		if usage.KeepsTRES(id, allTRES) {
			all.tres = append(all.tres, id)
		}
	}
	slices.Sort(all.tres)
	for _, a := range rows {
		all.ids = append(all.ids, a.ID)
	}
	slices.Sort(all.ids)
	all.ids = slices.Compact(all.ids)
	return all
}

// straddle reads the rows of p that straddle the last usage reset in the
// tier [lo, hi) one by one (usage.Cold.Straddling), and says where the
// tier goes on.
func (ld *coldLoader) straddle(ctx context.Context, p usage.Period, lo, hi int64) (int64, error) {
	s, next, ok := ld.cl.Straddling(p, lo, hi)
	if !ok {
		return lo, nil
	}
	rows, err := ld.r.Cluster.Usage(ctx, ld.f.layout, ld.f.qos, s.P, s.Lo, s.Hi)
	if err != nil {
		return 0, err
	}
	ld.cl.AddRows(rows, p)
	return next, nil
}

// purged reads the coarser rows that stand in for purged finer ones
// (usage.Cold.Purged), and says so.
func (ld *coldLoader) purged(ctx context.Context) error {
	f, loc := ld.f, ld.f.in.Location
	for _, g := range ld.cl.Purged() {
		rows, err := ld.r.Cluster.Usage(ctx, f.layout, f.qos, g.P, g.Lo, g.Hi)
		if err != nil {
			return err
		}
		if n, alloc := ld.cl.AddPurged(rows, g.P); n > 0 {
			table := ld.r.Cluster.quoted("assoc_usage_" + string(g.Finer) + "_table")
			f.problems = append(f.problems, &usage.Problem{Identity: fmt.Sprintf("%s purged before %d", table, g.Cut),
				Err: fmt.Errorf("usage at %s: %s holds no rows before %s (PurgeUsageAfter): the %d %s rows across %s are taken as spread evenly over their %s, off by up to %.0f billing-seconds",
					time.Unix(int64(f.in.At), 0).In(loc).Format(time.RFC3339), table, time.Unix(g.Cut, 0).In(loc).Format(time.DateOnly),
					n, g.P, time.Unix(f.lastRan.Hourly, 0).In(loc).Format(time.RFC3339), g.P, alloc)})
		}
	}
	return nil
}

// coarse reads the days and months (usage.Cold.Coarse), each in the part
// no finer table holds and the part one does.
func (ld *coldLoader) coarse(ctx context.Context) error {
	for _, t := range ld.cl.Coarse() {
		lo, err := ld.straddle(ctx, t.P, t.Lo, t.Hi)
		if err != nil {
			return err
		}
		fixed, refinable := ld.cl.Parts(t, lo)
		for i, part := range []usage.Span{fixed, refinable} {
			sums, err := ld.sums(ctx, part, ld.all)
			if err != nil {
				return err
			}
			ld.cl.AddCoarse(sums, t.P, i == 1)
		}
	}
	return nil
}

// sums reads usage.ColdSums of span s for the ids and TRES of k. Rows of
// another TRES or association, and rows whose alloc_secs no association
// could reach (usage.Weighing.Most), are left out. With QOS UsageFactor
// to apply (24.11+ per-QOS tables) the rows are read and summed here;
// otherwise the server sums them.
func (ld *coldLoader) sums(ctx context.Context, s usage.Span, k keys) ([]usage.ColdSum, error) {
	if s.Hi <= s.Lo || len(k.ids) == 0 || len(k.tres) == 0 {
		return nil, nil
	}
	c, f := ld.r.Cluster, ld.f
	w := ld.cl.Weighing(s.P, s.Hi)
	if f.layout.QOSUsage && anyFactor(f.qos) {
		rows, err := c.Usage(ctx, f.layout, f.qos, s.P, s.Lo, s.Hi)
		if err != nil {
			return nil, err
		}
		return w.Sum(rows, idSet(k.ids)), nil
	}
	period, err := rollupTable(s.P)
	if err != nil {
		return nil, err
	}
	phase := "0"
	if s.P == usage.Hour {
		phase = fmt.Sprintf(sqlHourPhase, w.Phase, w.Period)
	}
	var queries []string
	// below 1000 values: MariaDB turns longer IN lists into a temporary
	// table and scans
	for chunk := range slices.Chunk(k.ids, 999) {
		queries = append(queries, c.fill(sqlColdSums, period, phase, joinIDs(chunk), joinIDs(k.tres)))
	}
	return c.coldSums(ctx, "summing "+c.quoted("assoc_usage_"+period+"_table"), queries, w, s)
}

// coldSums runs the queries of sqlColdSums, coldWorkers at a time, and
// gives their sums scaled by w.
func (c Cluster) coldSums(ctx context.Context, what string, queries []string, w usage.Weighing, s usage.Span) ([]usage.ColdSum, error) {
	var (
		mu   sync.Mutex
		out  []usage.ColdSum
		errs = make([]error, len(queries))
		next = make(chan int)
		wg   sync.WaitGroup
	)
	for range coldWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var part []usage.ColdSum
				errs[i] = c.db.query(ctx, what, queries[i], func(rows *sql.Rows) error {
					var cs usage.ColdSum
					if err := rows.Scan(&cs.Assoc, &cs.TRES, &cs.Phase, &cs.Sum); err != nil {
						return err
					}
					part = append(part, w.Scaled(cs))
					return nil
				}, w.LnD, w.Ref, s.Lo, s.Hi, uint64(w.Most))
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
