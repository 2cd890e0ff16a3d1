package slurmdbd

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// Refresh rebuilds raw usage at at. Everything is read before the frozen
// sums change: a refresh that fails half-way leaves them as they were
// (decayed or added to twice, they would be wrong for good).
func (r *Refresher) Refresh(ctx context.Context, at time.Time) (_ *Snapshot, err error) {
	defer func() {
		if err != nil {
			r.layout = nil // a schema upgrade may be why: look again
		}
	}()
	f, err := r.start(ctx, at)
	if err != nil {
		return nil, err
	}
	if err := r.readFrozen(ctx, f); err != nil {
		return nil, err
	}
	if err := r.readRecent(ctx, f); err != nil {
		return nil, err
	}
	r.freeze(f)
	return r.rebuild(f), nil
}

// refresh is what one refresh read, and what it makes of it.
type refresh struct {
	at      time.Time
	layout  Layout
	rows    []Assoc
	tree    *Tree
	lastRan LastRan
	qos     map[uint32]QOS
	names   map[uint32]string
	in      usage.Inputs
	// Rows are read from from (usage.Horizon), finished jobs' tails from
	// tailFrom, up to end; the ones below watermark freeze.
	from, tailFrom, end, watermark int64
	// now is the last pass at at, which the frozen sums are decayed to.
	now float64
	// submitCharged: slurmctld charged heterogeneous-job components at
	// their submission (usage.Job.SubmitCharge).
	submitCharged bool
	fp            uint64
	// full: the whole history is read, into frozen; otherwise newly holds
	// the hours old enough to freeze since the last refresh, if any.
	full          bool
	frozen, newly usage.Frozen
	// frozenTo is the watermark once the refresh is done.
	frozenTo int64
	problems []error
}

// start reads the schema, associations, rollup watermarks, QOS and TRES,
// and decides what to read: everything, or what came since the last
// refresh.
func (r *Refresher) start(ctx context.Context, at time.Time) (*refresh, error) {
	c := r.Cluster
	l, err := r.readLayout(ctx, at)
	if err != nil {
		return nil, err
	}
	f := &refresh{at: at, layout: l, submitCharged: l.HetChargedAtSubmit && r.Passes.ChargeJobEnd}
	if f.rows, f.tree, err = r.associations(ctx, l); err != nil {
		return nil, err
	}
	loc := r.Location
	if loc == nil {
		loc = time.Local
	}
	if f.lastRan, err = c.LastRan(ctx); err != nil {
		return nil, err
	}
	// Everything below reads up to the last rollup and the jobs after it:
	// at a moment before the last rollup, the rollup as it stood then,
	// with the jobs' time since charged up to the moment.
	f.lastRan = f.lastRan.asOf(at.Unix(), loc)
	if f.qos, err = c.db.QOS(ctx); err != nil {
		return nil, err
	}
	if f.names, err = c.db.TRESNames(ctx); err != nil {
		return nil, err
	}
	atSec := fairshare.Seconds(at)
	f.in = usage.Inputs{Assocs: f.tree.Assocs, Node: r.assocs.node, UsageFactor: usageFactors(f.qos), LastHourly: f.lastRan.Hourly,
		Passes: r.Passes, At: atSec, Location: loc, AllTRES: c.AllTRES, RowsByQOS: l.QOSUsage && anyFactor(f.qos)}
	since := int64(0)
	if !r.Since.IsZero() {
		since = r.Since.Unix()
		f.in.Since = float64(since)
	}
	f.from, f.tailFrom = usage.Horizon(r.Passes, at.Unix(), since)
	f.end = at.Unix() + 1
	f.watermark = max(f.from, f.lastRan.Hourly-r.reread())
	f.now = r.Passes.LastPass(atSec)
	f.fp = fingerprint(l, r.Passes, r.Since, c.AllTRES)
	f.full = r.frozen.Usage == nil || f.fp != r.fingerprint || f.now < r.frozen.At || f.lastRan.Hourly < r.lastRollup || f.watermark < r.watermark
	if r.restored.at > 0 {
		if f.full, err = r.checkRestored(ctx, l, f.fp, f.full); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// reread is how far back from the last rollup a refresh reads the hours
// and the jobs that ended in them again (Reread), in seconds.
func (r *Refresher) reread() int64 {
	if r.Reread <= 0 {
		return int64(DefaultReread.Seconds())
	}
	return int64(r.Reread.Seconds())
}

// readLayout is the cluster's schema, read again when slurmdbd changed
// it (schemaMark), after a failed refresh (Refresh), and every
// RecheckHours for a change slurmdbd did not mark (an administrator's
// ALTER): reading information_schema at every refresh would be a tenth
// of a steady refresh.
func (r *Refresher) readLayout(ctx context.Context, at time.Time) (Layout, error) {
	stale := r.layout == nil || at.Unix()-r.layoutAt >= int64(RecheckHours.Seconds()) || at.Unix() < r.layoutAt
	if !stale {
		m, err := r.Cluster.schemaMark(ctx)
		if err != nil {
			return Layout{}, err
		}
		stale = !m.of(*r.layout)
	}
	if stale {
		l, err := r.Cluster.Layout(ctx)
		if err != nil {
			return Layout{}, err
		}
		r.layout, r.layoutAt = &l, at.Unix()
	}
	return *r.layout, nil
}

// readFrozen reads what changes the frozen sums: on a full load the whole
// history below the watermark, and the hours that are now old enough to
// freeze, decayed to now.
func (r *Refresher) readFrozen(ctx context.Context, f *refresh) error {
	f.frozenTo = r.watermark
	if f.full {
		f.frozen, f.frozenTo = usage.NewFrozen(f.now), f.from
		if f.lastRan.OK {
			if err := r.coldLoad(ctx, f); err != nil {
				return err
			}
			f.frozenTo = f.watermark
			if err := r.addTails(ctx, f, f.frozen, f.tailFrom, f.frozenTo); err != nil {
				return err
			}
			if err := r.checkPurged(ctx, f); err != nil {
				return err
			}
		}
	}
	if !f.lastRan.OK || f.watermark <= f.frozenTo {
		return nil
	}
	hours, err := r.Cluster.Usage(ctx, f.layout, f.qos, usage.Hour, f.frozenTo, f.watermark)
	if err != nil {
		return err
	}
	f.newly = usage.NewFrozen(f.now)
	f.newly.AddRows(&f.in, hours, usage.Hour)
	if err := r.addTails(ctx, f, f.newly, f.frozenTo, f.watermark); err != nil {
		return err
	}
	f.frozenTo = f.watermark
	return nil
}

// addTails adds to sums what the jobs that ended in (from, to] change of
// the rows they made (usage.Inputs.Tails): their uncharged tails, unless
// slurmctld charges them at the end, what their rows do not weigh
// (reweighs), and the charges at submission the rows have none of.
func (r *Refresher) addTails(ctx context.Context, f *refresh, sums usage.Frozen, from, to int64) error {
	read := r.Cluster.Ended
	switch {
	case to <= from:
		return nil
	case r.Passes.ChargeJobEnd && !r.reweighs(f) && !f.submitCharged:
		return nil
	case r.Passes.ChargeJobEnd && !r.reweighs(f):
		// only their charges at submission: reading every job that
		// ended over the horizon would be for its few heterogeneous ones
		read = r.Cluster.EndedHet
	}
	jobs, err := r.jobs(ctx, f, read, from, to)
	if err != nil {
		return err
	}
	tails, problems := f.in.Tails(jobs, false)
	f.problems = append(f.problems, problems...)
	sums.Add(tails)
	return nil
}

// readRecent reads the hours above the watermark and the jobs after the
// last rollup.
func (r *Refresher) readRecent(ctx context.Context, f *refresh) error {
	c := r.Cluster
	var err error
	if f.lastRan.OK {
		if f.full {
			r.recent.rows = nil
		}
		if f.in.Hours, err = r.hours(ctx, f); err != nil {
			return err
		}
	}
	if f.in.Jobs, err = r.jobs(ctx, f, c.Jobs, max(f.lastRan.Hourly, f.from), f.end); err != nil {
		return err
	}
	if !f.lastRan.OK {
		return nil
	}
	// for their tails and their partial hours (retime); the same between
	// rollups: a late job record makes slurmdbd rewind last_ran, which
	// changes the range
	e := &r.ended
	if !e.ok || e.from != f.frozenTo || e.to != f.lastRan.Hourly {
		e.ok, e.kept = false, nil
		if e.jobs, err = r.jobs(ctx, f, c.Ended, f.frozenTo, f.lastRan.Hourly); err != nil {
			return err
		}
		e.from, e.to, e.ok = f.frozenTo, f.lastRan.Hourly, true
	}
	f.in.Ended = e.jobs
	return nil
}

// freeze changes the frozen sums, every read having succeeded. They stay
// decayed to their pass until more hours freeze (usage.Rebuild scales
// them to now).
func (r *Refresher) freeze(f *refresh) {
	switch {
	case f.full:
		r.frozen = f.frozen
		r.FullLoads++
	case f.newly.Usage != nil:
		r.frozen.Advance(r.Passes, f.now, f.newly)
	}
	if f.full || f.newly.Usage != nil {
		r.Freezes++
		r.frozenDBTime, r.frozen.At = r.dbNow, f.now
	}
	r.fingerprint, r.lastRollup, r.watermark = f.fp, f.lastRan.Hourly, f.frozenTo
}

// rebuild rebuilds usage from the frozen sums and the rows and jobs above
// them.
func (r *Refresher) rebuild(f *refresh) *Snapshot {
	in := f.in
	in.Base, in.HoursFrom = r.frozen, float64(f.frozenTo)
	if ch := &r.charged; ch.c == nil || ch.freezes != r.Freezes || ch.reads != r.assocs.reads {
		ch.c, ch.freezes, ch.reads = in.Charge(r.frozen), r.Freezes, r.assocs.reads
	}
	in.Charged, in.BaseScale = r.charged.c, r.frozen.Scale(r.Passes, f.now)
	e := &r.ended
	if !e.kept.Serves(&in) {
		e.kept = in.KeepTails()
	}
	in.Kept = e.kept
	u, problems := usage.Rebuild(in)
	f.problems = append(f.problems, problems...)
	tree := f.tree
	for i := range tree.Assocs {
		tree.Assocs[i].RawUsage = u.Raw[i]
	}
	return &Snapshot{Cluster: r.Cluster.Name, Layout: f.layout, Rows: f.rows, Tree: tree, TRES: u.TRES, Uncharged: u.Uncharged, Running: u.Running, TailRisk: u.TailRisk, Unpriced: u.Unpriced, Jobs: in.Jobs,
		TRESNames: f.names, QOS: f.qos, LastRan: f.lastRan, At: f.at, Full: f.full, Problems: append(tree.Problems, f.problems...)}
}

// cuts are where the hour and day tables start holding data after
// PurgeUsageAfter: the start of the day of the oldest hour and of the month
// of the oldest day (from when they hold everything since from). Hours a
// purge left missing at the start of that day are lost.
func (r *Refresher) cuts(ctx context.Context, l Layout, from int64, loc *time.Location) (hourCut, dayCut int64, err error) {
	c := r.Cluster
	hourCut, dayCut = from, from
	if oldest, ok, err := c.Oldest(ctx, l, usage.Hour); err != nil {
		return 0, 0, err
	} else if ok && oldest > from {
		hourCut = max(from, usage.Day.Start(oldest, loc))
	}
	if hourCut == from {
		return hourCut, dayCut, nil // days matter only where hours are gone
	}
	if oldest, ok, err := c.Oldest(ctx, l, usage.Day); err != nil {
		return 0, 0, err
	} else if ok && oldest > from {
		dayCut = max(from, usage.Month.Start(oldest, loc))
	}
	return hourCut, dayCut, nil
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

// reweighs says whether jobs charge other than the rows they made count
// them: a QOS UsageFactor the rows do not carry (before the 24.11 per-QOS
// split), or billing weights that may give a fraction the rows truncate.
// Then the finished jobs are read for it, once, and their difference
// frozen with their rows; as for tails, from the jobs that ended 10
// half-lives back (usage.Horizon), older ones' weighing below 2^-10 of
// their usage: a year of a site's jobs at a 7-day half-life would be
// four times as many to read for a thousandth.
func (r *Refresher) reweighs(f *refresh) bool {
	if !f.in.RowsByQOS && anyFactor(f.qos) {
		return true
	}
	if r.Billing != nil {
		for _, w := range r.Billing.Weights {
			if w != nil {
				return true
			}
		}
	}
	return false
}

// checkPurged reports, on a full load that reweighs, the rolled-up hours
// whose jobs PurgeJobAfter removed: their rows count every QOS alike and
// the billing truncated, and nothing says by how much.
func (r *Refresher) checkPurged(ctx context.Context, f *refresh) error {
	if !r.reweighs(f) {
		return nil
	}
	job, ok, err := r.Cluster.OldestJob(ctx)
	if err != nil || !ok {
		return err
	}
	hour, ok, err := r.Cluster.Oldest(ctx, f.layout, usage.Hour)
	// usage in an hour before the oldest job started, which still weighs,
	// is of jobs gone
	from := max(hour, f.tailFrom)
	if err != nil || !ok || from >= job-3600 {
		return err
	}
	f.problems = append(f.problems, &usage.Problem{Identity: "jobs purged before the rolled-up hours", Err: fmt.Errorf(
		"%s holds no job older than one that started %s (PurgeJobAfter), while rolled-up hours since %s still weigh: they are counted as the rollups hold them, every QOS alike and the billing truncated, and may be off by a QOS UsageFactor other than 1",
		r.Cluster.quoted("job_table"), time.Unix(job, 0).UTC().Format(time.RFC3339), time.Unix(from, 0).UTC().Format(time.RFC3339))})
	return nil
}

// jobs reads jobs with read (Cluster.Jobs, Ended or EndedHet) and prices their
// billing by Billing, reporting per partition the jobs it cannot price.
func (r *Refresher) jobs(ctx context.Context, f *refresh, read func(context.Context, int64, int64, bool) ([]usage.Job, error), from, to int64) ([]usage.Job, error) {
	jobs, err := read(ctx, from, to, f.submitCharged)
	if err != nil || r.Billing == nil {
		return jobs, err
	}
	first, count := map[string]usage.Job{}, map[string]int{}
	for _, j := range r.Billing.Price(jobs, f.names) {
		if _, ok := first[j.Partition]; !ok {
			first[j.Partition] = j
		}
		count[j.Partition]++
	}
	for p, j := range first {
		f.problems = append(f.problems, &usage.Problem{Identity: "billing not priced in partition " + p, Err: fmt.Errorf(
			"partition %q: %d jobs' recorded billing is not the truncation of what slurm.conf's TRESBillingWeights and PriorityFlags give (e.g. job %d, tres_alloc %q): billed by other weights, so charged at the recorded integer, up to one billing unit a second below what slurmctld charged",
			p, count[p], j.ID, j.TRESAlloc)})
	}
	return jobs, nil
}
