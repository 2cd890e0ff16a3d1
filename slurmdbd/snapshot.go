package slurmdbd

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// horizonHalfLives is how far back usage is read: 40 half-lives weigh
// 2^-40, below a millionth of a billing-second per day of a full cluster.
const horizonHalfLives = 40

// tailHalfLives is how far back finished jobs are read for their uncharged
// last intervals: a tail is at most one PriorityCalcPeriod of a job, and
// 2^-10 of it is below the usage tolerance.
const tailHalfLives = 10

// DefaultReread is how much rolled-up time before the last hourly rollup a
// refresh reads again: slurmdbd re-rolls recent hours when late records
// arrive after an outage (trigger_reroll).
const DefaultReread = 6 * time.Hour

// Snapshot is one cluster's association tree with its usage rebuilt.
type Snapshot struct {
	Cluster string
	Layout  Layout
	Rows    []Assoc
	// Tree.Assocs carry the rebuilt RawUsage.
	Tree *Tree
	// TRES is decayed usage per TRES id and tree association; TRESNames
	// names the ids (cpu, mem, gres/gpu, ...).
	TRES      map[uint32][]float64
	TRESNames map[uint32]string
	// QOS are qos_table's live rows, by id.
	QOS map[uint32]QOS
	// Uncharged is finished jobs' uncharged billing usage per tree
	// association (see Usage.Uncharged).
	Uncharged []float64
	// Running is the billing rate of jobs that ran in the last
	// PriorityCalcPeriod per tree association (see Usage.Running).
	Running []float64
	// TailRisk bounds finished jobs' uncharged tails against the phase
	// of the passes (see Usage.TailRisk).
	TailRisk TailRisk
	LastRan  LastRan
	At       time.Time
	// Full is true when the refresh read the whole history.
	Full bool
	// Problems are rows left out, each naming the row.
	Problems []error
}

// Snapshot reads the cluster and rebuilds raw usage at at, from the whole
// history. since cuts it at the last usage reset (zero: none).
func (c Cluster) Snapshot(ctx context.Context, at time.Time, passes fairshare.Passes, since time.Time, loc *time.Location) (*Snapshot, error) {
	r := Refresher{Cluster: c, Passes: passes, Since: since, Location: loc}
	return r.Refresh(ctx, at)
}

// SnapshotAsCtld is Snapshot with the associations in the order slurmctld,
// started at boot, keeps them (OrderAsSlurmctld).
func (c Cluster) SnapshotAsCtld(ctx context.Context, at, boot time.Time, passes fairshare.Passes, since time.Time, loc *time.Location) (*Snapshot, error) {
	r := Refresher{Cluster: c, Passes: passes, Since: since, Location: loc, Boot: boot}
	return r.Refresh(ctx, at)
}

// Refresher rebuilds one cluster's usage again and again. Rolled-up usage
// older than Reread before the last hourly rollup is kept as decayed sums
// per association (the frozen part) and only decayed forward; each refresh
// reads the rows above that watermark, and the jobs after the last rollup.
// It reads everything again when the settings or the schema change, or
// when slurmdbd rewinds its rollups further back; associations may come
// and go between incremental refreshes.
type Refresher struct {
	Cluster  Cluster
	Passes   fairshare.Passes
	Since    time.Time
	Location *time.Location
	// Reread defaults to DefaultReread.
	Reread time.Duration
	// Boot is when slurmctld started (scontrol show config's BOOT_TIME),
	// for the order it keeps associations in; zero: the database's order.
	Boot time.Time

	fingerprint uint64
	frozen      map[Key]float64
	// frozenUncharged is finished jobs' uncharged usage per id_assoc,
	// frozen with the rows it was taken out of.
	frozenUncharged map[uint32]float64
	frozenAt        float64 // the pass the frozen sums are decayed to
	watermark       int64   // rows with time_start below it are frozen
	lastRollup      int64
	// assocs are the association rows and tree, shared with the
	// refreshers Seed gives the frozen sums to.
	assocs *assocCache
	// charged is the frozen sums charged to the tree as of frozenAt, for
	// the Freezes and association rows (assocCache.reads) it was made at.
	charged struct {
		c              *Charged
		freezes, reads int
	}
	recent recentHours
	// ended are the jobs that ended in [from, to), the rolled-up hours
	// above the watermark, as last read.
	ended struct {
		from, to int64
		jobs     []Job
		ok       bool
	}
	layout   *Layout
	layoutAt int64
	// dbNow is the database server's clock at the start of the refresh,
	// frozenDBTime its value when the frozen sums last changed.
	dbNow, frozenDBTime int64
	restored            restoredState
	// FullLoads counts refreshes that read the whole history.
	FullLoads int
	// Freezes counts refreshes that changed the frozen sums (a full load,
	// or hours old enough to freeze): when to SaveState.
	Freezes int
	// AssocReads counts refreshes that read the association table.
	AssocReads int
	// Refined counts the associations the last full load read again from
	// hours (coldLoad).
	Refined int
}

// assocCache is the association rows and tree as last read, kept while
// the table is unchanged.
type assocCache struct {
	version assocVersion
	layout  Layout
	boot    time.Time
	rows    []Assoc
	tree    *Tree
	node    map[uint32]int
	// txn is txn_table's newest id at the last scan of the table,
	// scannedAt the server's clock then.
	txn, scannedAt int64
	// reads counts the reads of the rows.
	reads int
}

// associations reads the association rows and builds the tree, or gives
// those of the last refresh when the table has not changed since: at 100k
// associations reading, ordering and linking them is most of a steady
// refresh. The tree is a copy each time (callers fill in usage).
func (r *Refresher) associations(ctx context.Context, l Layout) ([]Assoc, *Tree, error) {
	c := r.Cluster
	if r.assocs == nil {
		r.assocs = &assocCache{}
	}
	k := r.assocs
	cached := func() ([]Assoc, *Tree, error) {
		t := *k.tree
		t.Assocs = slices.Clone(t.Assocs)
		return k.rows, &t, nil
	}
	same := k.tree != nil && k.version.stable && l == k.layout && r.Boot.Equal(k.boot)
	var txn int64
	if l.Txn {
		// Nothing logged since the last scan: the table is as it was,
		// unless someone wrote it outside slurmdbd (scanned again every
		// RecheckHours for that).
		id, now, err := c.lastTxn(ctx)
		if err != nil {
			return nil, nil, err
		}
		r.dbNow, txn = now, id
		if same && id == k.txn && now >= k.scannedAt && now-k.scannedAt < int64(RecheckHours.Seconds()) {
			return cached()
		}
	}
	v, now, err := c.assocVersion(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.dbNow = now
	k.txn, k.scannedAt = txn, now
	if same && v.stable && v == k.version {
		return cached()
	}
	rows, err := c.Associations(ctx, l)
	if err != nil {
		return nil, nil, err
	}
	if !r.Boot.IsZero() {
		OrderAsSlurmctld(rows, r.Boot)
	}
	tree, err := BuildTree(rows)
	if err != nil {
		return nil, nil, err
	}
	r.AssocReads++
	k.reads++
	k.version, k.layout, k.boot, k.rows, k.node = v, l, r.Boot, rows, nodes(rows, tree)
	t := *tree
	t.Assocs = slices.Clone(t.Assocs)
	k.tree = &t
	return rows, tree, nil
}

// Seed gives r, before its first refresh, the frozen sums of o (a
// refresher of the same cluster and settings), so that r's first refresh
// is incremental too when it is not earlier than o's last: a cold load of
// a large history costs seconds. Without them, or when anything differs,
// r reads the whole history itself.
func (r *Refresher) Seed(o *Refresher) {
	if r.frozen != nil || o.frozen == nil {
		return
	}
	// the same rows and tree: at 100k associations one copy is 40 MB
	r.assocs = o.assocs
	r.fingerprint, r.frozenAt, r.watermark, r.lastRollup, r.frozenDBTime = o.fingerprint, o.frozenAt, o.watermark, o.lastRollup, o.frozenDBTime
	r.frozen, r.frozenUncharged = maps.Clone(o.frozen), maps.Clone(o.frozenUncharged)
}

// Refresh rebuilds raw usage at at.
func (r *Refresher) Refresh(ctx context.Context, at time.Time) (_ *Snapshot, err error) {
	c := r.Cluster
	defer func() {
		if err != nil {
			r.layout = nil // a schema upgrade may be why: look again
		}
	}()
	// the schema changes only with a slurmdbd upgrade: reading
	// information_schema was a tenth of a steady refresh
	if r.layout == nil || at.Unix()-r.layoutAt >= int64(RecheckHours.Seconds()) || at.Unix() < r.layoutAt {
		l, err := c.Layout(ctx)
		if err != nil {
			return nil, err
		}
		r.layout, r.layoutAt = &l, at.Unix()
	}
	l := *r.layout
	rows, tree, err := r.associations(ctx, l)
	if err != nil {
		return nil, err
	}
	loc := r.Location
	if loc == nil {
		loc = time.Local
	}
	lastRan, err := c.LastRan(ctx)
	if err != nil {
		return nil, err
	}
	// Everything below reads up to the last rollup and the jobs after it:
	// at a moment before the last rollup, the rollup as it stood then,
	// with the jobs' time since charged up to the moment.
	lastRan = lastRan.asOf(at.Unix(), loc)
	qos, err := c.db.QOS(ctx)
	if err != nil {
		return nil, err
	}
	names, err := c.db.TRESNames(ctx)
	if err != nil {
		return nil, err
	}
	reread := r.Reread
	if reread <= 0 {
		reread = DefaultReread
	}
	atSec := float64(at.UnixNano()) / 1e9
	now := r.Passes.LastPass(atSec)
	in := UsageInputs{Rows: rows, Tree: tree, QOS: qos, LastRan: lastRan, Passes: r.Passes, At: atSec, Location: loc, AllTRES: c.AllTRES}
	from := int64(0)
	if r.Passes.HalfLife > 0 {
		from = at.Unix() - int64(horizonHalfLives*r.Passes.HalfLife)
	}
	if !r.Since.IsZero() {
		from = max(from, r.Since.Unix())
		in.Since = float64(r.Since.Unix())
	}
	end := at.Unix() + 1
	// Rows are read from the one that holds from: bucket() keeps the part
	// after a reset.
	from = max(0, from-3600)
	watermark := max(from, lastRan.Hourly-int64(reread.Seconds()))

	fp := fingerprint(l, r.Passes, r.Since, c.AllTRES)
	full := r.frozen == nil || fp != r.fingerprint || now < r.frozenAt || lastRan.Hourly < r.lastRollup || watermark < r.watermark
	if r.restored.at > 0 {
		if full, err = r.checkRestored(ctx, l, fp, full); err != nil {
			return nil, err
		}
	}
	// Everything is read before the frozen sums change: a refresh that
	// fails half-way leaves them as they were (decayed or added to twice,
	// they would be wrong for good).
	var problems []error
	tails := func(usage map[Key]float64, uncharged map[uint32]float64, from, to int64) error {
		if r.Passes.ChargeJobEnd || to <= from {
			return nil
		}
		jobs, err := c.Ended(ctx, from, to)
		if err != nil {
			return err
		}
		u, unc, p := in.Tails(jobs, false)
		problems = append(problems, p...)
		for k, v := range u {
			usage[k] += v
		}
		for id, v := range unc {
			uncharged[id] += v
		}
		return nil
	}
	frozen, frozenUncharged, frozenTo := r.frozen, r.frozenUncharged, r.watermark
	if full {
		frozen, frozenUncharged, frozenTo = map[Key]float64{}, map[uint32]float64{}, from
		if lastRan.OK {
			hourCut, dayCut, err := r.cuts(ctx, l, from, loc)
			if err != nil {
				return nil, err
			}
			p, err := r.coldLoad(ctx, &in, frozen, l, qos, names, from, watermark, hourCut, dayCut, loc)
			if err != nil {
				return nil, err
			}
			problems = append(problems, p...)
			frozenTo = watermark
			// older tails weigh below 2^-tailHalfLives
			tailFrom := from
			if r.Passes.HalfLife > 0 {
				tailFrom = max(from, at.Unix()-int64(tailHalfLives*r.Passes.HalfLife))
			}
			if err := tails(frozen, frozenUncharged, tailFrom, frozenTo); err != nil {
				return nil, err
			}
		}
	}
	// hours that are now old enough to freeze, decayed to now
	var newly map[Key]float64
	var newlyUncharged map[uint32]float64
	if lastRan.OK && watermark > frozenTo {
		hours, err := c.Usage(ctx, l, qos, Hour, frozenTo, watermark)
		if err != nil {
			return nil, err
		}
		newly, newlyUncharged = map[Key]float64{}, map[uint32]float64{}
		for _, u := range hours {
			newly[Key{u.Assoc, u.TRES}] += in.bucket(u, Hour)
		}
		if err := tails(newly, newlyUncharged, frozenTo, watermark); err != nil {
			return nil, err
		}
		frozenTo = watermark
	}
	if lastRan.OK {
		if full {
			r.recent.rows = nil
		}
		if in.Hours, err = r.hours(ctx, l, qos, frozenTo, end, lastRan.Hourly, at.Unix()); err != nil {
			return nil, err
		}
	}
	if in.Jobs, err = c.Jobs(ctx, max(lastRan.Hourly, from), end); err != nil {
		return nil, err
	}
	if lastRan.OK {
		// for their tails and their partial hours (retime); the same
		// between rollups: a late job record makes slurmdbd rewind
		// last_ran, which changes the range
		e := &r.ended
		if !e.ok || e.from != frozenTo || e.to != lastRan.Hourly {
			e.ok = false
			if e.jobs, err = c.Ended(ctx, frozenTo, lastRan.Hourly); err != nil {
				return nil, err
			}
			e.from, e.to, e.ok = frozenTo, lastRan.Hourly, true
		}
		in.Ended = e.jobs
	}

	// Every read succeeded: change the frozen sums. They stay decayed to
	// frozenAt until more hours freeze (RawUsage scales them to now).
	if full {
		r.frozen, r.frozenUncharged = frozen, frozenUncharged
		r.FullLoads++
	} else if newly != nil {
		decay := math.Pow(r.Passes.D(), now-r.frozenAt)
		for k := range r.frozen {
			r.frozen[k] *= decay
		}
		for id := range r.frozenUncharged {
			r.frozenUncharged[id] *= decay
		}
		for k, v := range newly {
			r.frozen[k] += v
		}
		for id, v := range newlyUncharged {
			r.frozenUncharged[id] += v
		}
	}
	if full || newly != nil {
		r.Freezes++
		r.frozenDBTime, r.frozenAt = r.dbNow, now
	}
	r.fingerprint, r.lastRollup, r.watermark = fp, lastRan.Hourly, frozenTo
	in.Base, in.BaseUncharged, in.Node, in.HoursFrom = r.frozen, r.frozenUncharged, r.assocs.node, float64(frozenTo)
	if ch := &r.charged; ch.c == nil || ch.freezes != r.Freezes || ch.reads != r.assocs.reads {
		ch.c, ch.freezes, ch.reads = in.Charge(r.frozen, r.frozenUncharged, in.Node), r.Freezes, r.assocs.reads
	}
	in.Charged, in.BaseScale = r.charged.c, math.Pow(r.Passes.D(), now-r.frozenAt)
	usage, rawProblems := RawUsage(in)
	problems = append(problems, rawProblems...)
	for i := range tree.Assocs {
		tree.Assocs[i].RawUsage = usage.Raw[i]
	}
	return &Snapshot{Cluster: c.Name, Layout: l, Rows: rows, Tree: tree, TRES: usage.TRES, Uncharged: usage.Uncharged, Running: usage.Running, TailRisk: usage.TailRisk, TRESNames: names, QOS: qos, LastRan: lastRan, At: at, Full: full,
		Problems: append(tree.Problems, problems...)}, nil
}

// cuts are where the hour and day tables start holding data after
// PurgeUsageAfter: the start of the day of the oldest hour and of the month
// of the oldest day (from when they hold everything since from). Hours a
// purge left missing at the start of that day are lost.
func (r *Refresher) cuts(ctx context.Context, l Layout, from int64, loc *time.Location) (hourCut, dayCut int64, err error) {
	c := r.Cluster
	hourCut, dayCut = from, from
	if oldest, ok, err := c.Oldest(ctx, l, Hour); err != nil {
		return 0, 0, err
	} else if ok && oldest > from {
		hourCut = max(from, startOf(oldest, loc, false))
	}
	if hourCut == from {
		return hourCut, dayCut, nil // days matter only where hours are gone
	}
	if oldest, ok, err := c.Oldest(ctx, l, Day); err != nil {
		return 0, 0, err
	} else if ok && oldest > from {
		dayCut = max(from, startOf(oldest, loc, true))
	}
	return hourCut, dayCut, nil
}

// startOf is the start of t's local day (or month).
func startOf(t int64, loc *time.Location, month bool) int64 {
	lt := time.Unix(t, 0).In(loc)
	day := lt.Day()
	if month {
		day = 1
	}
	return time.Date(lt.Year(), lt.Month(), day, 0, 0, 0, 0, loc).Unix()
}

// fingerprint changes when what the frozen sums depend on changes: the
// decay settings, the reset, the TRES read and the schema. Not the
// associations: the sums are kept per id_assoc and charged to the tree
// anew at every refresh (RawUsage), and a new association has no history,
// so adding users at a 100k-association site does not mean a cold load.
func fingerprint(l Layout, p fairshare.Passes, since time.Time, allTRES bool) uint64 {
	h := fnv.New64a()
	b := fmt.Appendf(nil, "%+v", l)
	b = strconv.AppendFloat(b, p.HalfLife, 'g', -1, 64)
	b = strconv.AppendFloat(b, p.Period, 'g', -1, 64)
	b = strconv.AppendFloat(b, math.Mod(p.Phase, p.Period), 'g', -1, 64)
	b = strconv.AppendBool(b, p.ChargeJobEnd)
	b = strconv.AppendFloat(b, p.LockWait, 'g', -1, 64)
	b = strconv.AppendInt(b, since.Unix(), 10)
	b = strconv.AppendBool(b, allTRES)
	h.Write(b)
	return h.Sum64()
}
