package slurmdbd

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

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
	// association (see usage.Usage.Uncharged).
	Uncharged []float64
	// Running is the billing rate of jobs that ran in the last
	// PriorityCalcPeriod per tree association (see usage.Usage.Running).
	Running []float64
	// TailRisk bounds finished jobs' uncharged tails against the phase
	// of the passes (see usage.Usage.TailRisk).
	TailRisk usage.TailRisk
	// Unpriced bounds what slurmctld charged beyond the recorded billing
	// of the jobs whose billing is not known exactly (usage.Usage.Unpriced).
	Unpriced []float64
	// Jobs are the jobs that ran after the last hourly rollup, as the
	// rebuild charges them pass by pass.
	Jobs    []usage.Job
	LastRan LastRan
	At      time.Time
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
	// Billing is how slurm.conf bills the cluster's jobs, to charge them
	// the unrounded billing slurmctld charges (usage.BillingRules.Price);
	// nil: the billing recorded, truncated.
	Billing *usage.BillingRules

	fingerprint uint64
	// frozen is the frozen sums, with finished jobs' uncharged usage
	// frozen with the rows it was taken out of.
	frozen     usage.Frozen
	watermark  int64 // rows with time_start below it are frozen
	lastRollup int64
	// assocs are the association rows and tree, shared with the
	// refreshers Seed gives the frozen sums to.
	assocs *assocCache
	// charged is the frozen sums charged to the tree as of frozen.At,
	// for the Freezes and association rows (assocCache.reads) it was made
	// at.
	charged struct {
		c              *usage.Charged
		freezes, reads int
	}
	recent recentHours
	// ended are the jobs that ended in (from, to], the rolled-up hours
	// above the watermark, as last read, and their tails kept from a
	// refresh to the next (usage.KeptTails).
	ended struct {
		from, to int64
		jobs     []usage.Job
		ok       bool
		kept     *usage.KeptTails
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
	if r.frozen.Usage != nil || o.frozen.Usage == nil {
		return
	}
	// the same rows and tree: at 100k associations one copy is 40 MB
	r.assocs = o.assocs
	r.fingerprint, r.watermark, r.lastRollup, r.frozenDBTime = o.fingerprint, o.watermark, o.lastRollup, o.frozenDBTime
	r.frozen = usage.Frozen{Usage: maps.Clone(o.frozen.Usage), Uncharged: maps.Clone(o.frozen.Uncharged), At: o.frozen.At}
}
