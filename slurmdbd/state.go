package slurmdbd

import (
	"context"
	"database/sql"
	"encoding/gob"
	"fmt"
	"io"
)

// A cold load of 100k associations and a year of rollups sums some 15
// million rows on the server: seconds to a minute. The frozen sums it
// yields only decay forward, so a restarted exporter can start from the
// ones it saved (SaveState, RestoreState) and read what came after, if
// nothing they depend on changed while it was stopped: the settings and
// schema (the fingerprint), the rollups below the watermark (slurmdbd
// re-rolls after late job records or an admin's sacctmgr rollup, and
// stamps mod_time when it does), last_ran going back.

// stateFormat changes when the saved state's meaning does.
const stateFormat = 1

// savedState is what SaveState writes.
type savedState struct {
	Format      int
	Cluster     string
	Fingerprint uint64
	FrozenAt    float64
	Watermark   int64
	LastRollup  int64
	// DBTime is the database server's clock when the frozen sums were
	// last changed: a row re-rolled after it has mod_time >= DBTime.
	DBTime    int64
	Frozen    map[Key]float64
	Uncharged map[uint32]float64
}

// SaveState writes the frozen sums and what they depend on. It writes
// nothing before the first successful refresh.
func (r *Refresher) SaveState(w io.Writer) error {
	if r.frozen == nil {
		return fmt.Errorf("cluster %s: no frozen usage to save yet", r.Cluster.Name)
	}
	return gob.NewEncoder(w).Encode(savedState{Format: stateFormat, Cluster: r.Cluster.Name, Fingerprint: r.fingerprint,
		FrozenAt: r.frozenAt, Watermark: r.watermark, LastRollup: r.lastRollup, DBTime: r.frozenDBTime,
		Frozen: r.frozen, Uncharged: r.frozenUncharged})
}

// RestoreState gives r, before its first refresh, the frozen sums SaveState
// wrote for cluster. The first refresh checks them against the database
// and reads the whole history instead when they do not hold (Snapshot.Full
// says so).
func (r *Refresher) RestoreState(rd io.Reader, cluster string) error {
	if r.frozen != nil {
		return fmt.Errorf("cluster %s: refreshed already: nothing to restore into", cluster)
	}
	var s savedState
	if err := gob.NewDecoder(rd).Decode(&s); err != nil {
		return fmt.Errorf("reading saved usage: %w", err)
	}
	if s.Format != stateFormat || s.Cluster != cluster || s.Frozen == nil || s.DBTime <= 0 {
		return fmt.Errorf("saved usage of cluster %q, format %d: expected cluster %q, format %d", s.Cluster, s.Format, cluster, stateFormat)
	}
	r.fingerprint, r.frozenAt, r.watermark, r.lastRollup = s.Fingerprint, s.FrozenAt, s.Watermark, s.LastRollup
	r.frozen, r.frozenUncharged, r.restoredAt = s.Frozen, s.Uncharged, s.DBTime
	if r.frozenUncharged == nil {
		r.frozenUncharged = map[uint32]float64{}
	}
	return nil
}

// rerolled says whether slurmdbd rewrote hours below the watermark since
// the database time since. 24.11+ finds the rows written since through the
// mod_time index. Up to 23.02 only time_start is indexed: the hour below
// the watermark is looked at, which a re-roll reaching further back
// rewrites too (slurmdbd rolls every hour from the rewind on), or the day
// below it when that hour holds no usage (a day is 0.9 s at 100k
// associations, an hour 40 ms); a day without any usage proves nothing and
// counts as rewritten.
func (r *Refresher) rerolled(ctx context.Context, l Layout, since int64) (bool, error) {
	c := r.Cluster
	table := c.table("assoc_usage_hour_table")
	if l.hoursByModTime() {
		var newer int64
		err := c.db.query(ctx, "reading "+table, "SELECT COUNT(*) FROM "+table+" WHERE mod_time >= ? AND time_start < ?", func(rows *sql.Rows) error {
			return rows.Scan(&newer)
		}, since, r.watermark)
		return newer > 0, err
	}
	for _, span := range []int64{3600, 86400} {
		var n, newer int64
		err := c.db.query(ctx, "reading "+table, "SELECT COUNT(*), COALESCE(SUM(mod_time >= ?), 0) FROM "+table+" WHERE time_start >= ? AND time_start < ?", func(rows *sql.Rows) error {
			return rows.Scan(&n, &newer)
		}, since, r.watermark-span, r.watermark)
		if err != nil || n > 0 {
			return newer > 0, err
		}
	}
	return true, nil
}
