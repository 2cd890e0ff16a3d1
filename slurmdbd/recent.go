package slurmdbd

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strconv"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// recentHours are the hour rows at or above the watermark as last read,
// kept between refreshes: slurmdbd sets mod_time on every row it writes
// or re-rolls, so a steady refresh reads only the rows changed since.
// Re-reading the whole window would be most of a steady refresh
// (BenchmarkLoad).
type recentHours struct {
	rows map[hourKey]usage.Row
	// lastRan and readAt are the hourly rollup and the refresh moment of
	// the last read.
	lastRan, readAt int64
	// list is the rows in a fixed order, rebuilt when they change:
	// summed in map order, usage differed in its last bits from one
	// refresh to the next and every association series was rendered
	// again. last is the latest time_start among them.
	list  []usage.Row
	last  int64
	dirty bool
	// from is the watermark they start at; newest the largest mod_time
	// read. Rows are read again from newest itself: slurmdbd stamps a
	// rollup's rows with one second, and some of them may commit after a
	// read that saw the others.
	from, newest int64
}

type hourKey struct {
	usage.Key
	start int64
}

// RecheckHours is how often a steady refresh looks for re-rolled hours
// when the hour table has no mod_time index (up to 23.02): the query then
// reads the whole re-read window on the server, most of a steady
// refresh. slurmdbd rewrites rolled hours only after
// rewinding last_ran (late job records), so between rollups nothing
// changes unless a rewind and its re-roll both fall between two refreshes;
// those hours are seen within RecheckHours.
const RecheckHours = 10 * time.Minute

// sqlChangedHours reads the hour rows with from <= time_start < to
// written at or after a mod_time, of the TRES of condition %[2]s
// (tresCond). Rows marked deleted stay: slurmdbd marks a removed
// association's usage rows deleted (accounting_storage_mysql.c
// remove_common), while slurmctld keeps that usage in the parent account
// (22.05+ leaf_usage).
const sqlChangedHours = "SELECT `id`, `id_tres`, `time_start`, `alloc_secs`, CAST(`mod_time` AS SIGNED) FROM `%[1]s_assoc_usage_hour_table`" +
	" WHERE %[2]s AND `time_start` >= ? AND `time_start` < ? AND `mod_time` >= ?"

// hours gives the hour rows of refresh f from the watermark (frozenTo) to
// its end, reading only what changed since the last call when it can.
func (r *Refresher) hours(ctx context.Context, f *refresh) ([]usage.Row, error) {
	c, l, qos := r.Cluster, f.layout, f.qos
	from, to, lastRan, at := f.frozenTo, f.end, f.lastRan.Hourly, f.at.Unix()
	k := &r.recent
	if l.QOSUsage && anyFactor(qos) {
		// weighted by the per-QOS split: read it all, as Usage does
		k.rows = nil
		return c.Usage(ctx, l, qos, usage.Hour, from, to)
	}
	if k.rows == nil || from < k.from {
		k.rows, k.newest, k.list = map[hourKey]usage.Row{}, 0, nil
	} else if !l.hoursByModTime() && from == k.from && lastRan == k.lastRan && at >= k.readAt && at-k.readAt < int64(RecheckHours.Seconds()) {
		return k.rowsBefore(to), nil
	}
	k.lastRan, k.readAt = lastRan, at
	for key := range k.rows {
		if key.start < from {
			delete(k.rows, key) // frozen now
			k.dirty = true
		}
	}
	k.from = from
	cond, tres := c.tresCond()
	since := k.newest
	if l.hoursByModTime() {
		// an hour is rolled up after it ends: lets the mod_time index
		// bound the rows on the first read too
		since = max(since, from)
	}
	err := c.db.query(ctx, "reading "+c.quoted("assoc_usage_hour_table"), c.fill(sqlChangedHours, cond), func(sr *sql.Rows) error {
		var u usage.Row
		var mod int64
		if err := sr.Scan(&u.Assoc, &u.TRES, &u.Start, &u.AllocSecs, &mod); err != nil {
			return err
		}
		k.rows[hourKey{usage.Key{Assoc: u.Assoc, TRES: u.TRES}, u.Start}] = u
		k.dirty = true
		k.newest = max(k.newest, mod)
		return nil
	}, tres, from, to, strconv.FormatInt(since, 10))
	if err != nil {
		k.rows = nil // read it all next time
		return nil, err
	}
	return k.rowsBefore(to), nil
}

func (k *recentHours) rowsBefore(to int64) []usage.Row {
	if !k.dirty && k.list != nil && k.last < to {
		return k.list
	}
	out := make([]usage.Row, 0, len(k.rows))
	k.last = 0
	for key, u := range k.rows {
		if key.start < to {
			out = append(out, u)
			k.last = max(k.last, key.start)
		}
	}
	slices.SortFunc(out, func(a, b usage.Row) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Assoc, b.Assoc), cmp.Compare(a.TRES, b.TRES))
	})
	// rows at to or later were left out: build again next time
	k.list, k.dirty = out, len(out) < len(k.rows)
	return out
}
