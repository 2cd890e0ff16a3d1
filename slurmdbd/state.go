package slurmdbd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// A cold load of 100k associations and a year of rollups sums some 15
// million rows on the server: seconds to a minute. The frozen sums it
// yields only decay forward, so a restarted exporter can start from the
// ones it saved (SaveState, RestoreState) and read what came after, if
// nothing they depend on changed while it was stopped: the settings and
// schema (the fingerprint), the database (dbIdentity), the rollups below
// the watermark (slurmdbd re-rolls after late job records or an admin's
// sacctmgr rollup, and stamps mod_time when it does), last_ran going back.
// The file itself is trusted only as far as its checksum: a state that
// decodes is not necessarily the one written.

// A state is stateMagic, the format (uint32), the body's length (uint64)
// and the body's SHA-256, then the body: savedState in gob. Big-endian.
const (
	stateMagic = "slurmdbd_exporter usage\n"
	headerSize = len(stateMagic) + 4 + 8 + sha256.Size
	// stateFormat changes when the state's layout or meaning does: 2
	// added the header and the database identity (1 was gob alone), 3
	// the finished jobs' tail risk among the frozen sums (tresTailRate),
	// 4 the tails a pass's lock wait may have lost (tresTailLost).
	stateFormat = 4
)

// MaxStateFile bounds what is read of a state, header included. A state
// holds some 15 bytes per association and TRES read, and per association
// with uncharged usage: 3 MB at 100k associations (billing), 11 MB with
// 6 TRES (--collector.extended).
const MaxStateFile = 256 << 20

// savedState is what SaveState writes.
type savedState struct {
	Cluster     string
	DB          dbIdentity
	Fingerprint uint64
	FrozenAt    float64
	Watermark   int64
	LastRollup  int64
	// DBTime is the database server's clock when the frozen sums were
	// last changed: a row re-rolled after it has mod_time >= DBTime.
	DBTime    int64
	Frozen    map[usage.Key]float64
	Uncharged map[uint32]float64
}

// dbIdentity tells apart databases holding a cluster of the same name
// (a test instance, a reinstall, another site), which the other checks
// do not: there, rows written before the state was saved look like rows
// not re-rolled since.
type dbIdentity struct {
	// Created is cluster_table.creation_time: when the cluster was added
	// to this database. Another database, or the cluster removed and
	// added again, has its own.
	Created int64
	// FirstHour is the oldest rolled-up hour (Oldest): where this
	// database's history starts. 0 when no index makes it cheap to find.
	// A purge moves it: a state saved before a purge that came before
	// the next save is not used (one cold load).
	FirstHour int64
}

const sqlCreated = "SELECT `creation_time` FROM `cluster_table` WHERE `name` = ?"

// identity reads c's dbIdentity: two lookups through an index.
func (c Cluster) identity(ctx context.Context, l Layout) (id dbIdentity, err error) {
	err = c.db.query(ctx, "reading cluster_table", sqlCreated, func(rows *sql.Rows) error {
		return rows.Scan(&id.Created)
	}, c.Name)
	if err == nil && (l.HourTimeIndex || l.HourModIndex) {
		id.FirstHour, _, err = c.Oldest(ctx, l, usage.Hour)
	}
	return id, err
}

// restoredState is what RestoreState gave that the first refresh checks.
type restoredState struct {
	// at is the database's clock when the sums last changed (DBTime);
	// 0 once checked.
	at int64
	db dbIdentity
	// mismatch is why the check refused the sums, until RestoreMismatch.
	mismatch string
}

// SaveState writes the frozen sums and what they depend on. It writes
// nothing before the first successful refresh.
func (r *Refresher) SaveState(ctx context.Context, w io.Writer) error {
	c := r.Cluster
	if r.frozen.Usage == nil || r.layout == nil {
		return fmt.Errorf("cluster %s: no frozen usage to save yet", c.Name)
	}
	id, err := c.identity(ctx, *r.layout)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	err = gob.NewEncoder(&body).Encode(savedState{Cluster: c.Name, DB: id, Fingerprint: r.fingerprint,
		FrozenAt: r.frozen.At, Watermark: r.watermark, LastRollup: r.lastRollup, DBTime: r.frozenDBTime,
		Frozen: r.frozen.Usage, Uncharged: r.frozen.Uncharged})
	if err != nil {
		return err
	}
	if body.Len() > MaxStateFile-headerSize {
		return fmt.Errorf("cluster %s: a state of %d bytes: RestoreState reads at most %d (MaxStateFile)", c.Name, headerSize+body.Len(), MaxStateFile)
	}
	sum := sha256.Sum256(body.Bytes())
	h := binary.BigEndian.AppendUint32([]byte(stateMagic), stateFormat)
	h = binary.BigEndian.AppendUint64(h, uint64(body.Len()))
	if _, err := w.Write(append(h, sum[:]...)); err != nil {
		return err
	}
	_, err = body.WriteTo(w)
	return err
}

// RestoreState gives r, before its first refresh, the frozen sums SaveState
// wrote for cluster. The first refresh checks them against the database
// and reads the whole history instead when they do not hold (Snapshot.Full
// says so, RestoreMismatch why).
func (r *Refresher) RestoreState(rd io.Reader, cluster string) error {
	if r.frozen.Usage != nil {
		return fmt.Errorf("cluster %s: refreshed already: nothing to restore into", cluster)
	}
	body, err := stateBody(rd)
	if err != nil {
		return err
	}
	var s savedState
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&s); err != nil {
		return fmt.Errorf("decoding saved usage: %w", err)
	}
	if s.Cluster != cluster || s.Frozen == nil || s.DBTime <= 0 {
		return fmt.Errorf("saved usage of cluster %q: expected cluster %q", s.Cluster, cluster)
	}
	r.fingerprint, r.watermark, r.lastRollup = s.Fingerprint, s.Watermark, s.LastRollup
	r.frozen, r.restored = usage.Frozen{Usage: s.Frozen, Uncharged: s.Uncharged, At: s.FrozenAt}, restoredState{at: s.DBTime, db: s.DB}
	if r.frozen.Uncharged == nil {
		r.frozen.Uncharged = map[uint32]float64{}
	}
	return nil
}

// stateBody checks a state's header and gives the body it vouches for,
// reading at most MaxStateFile bytes of rd.
func stateBody(rd io.Reader) ([]byte, error) {
	var h [headerSize]byte
	n, err := io.ReadFull(rd, h[:])
	if !bytes.HasPrefix(h[:n], []byte(stateMagic)) {
		return nil, fmt.Errorf("not a saved usage state: expected one starting with %q (format %d)", stateMagic, stateFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("saved usage truncated: %d bytes, expected a header of %d", n, headerSize)
	}
	if f := binary.BigEndian.Uint32(h[len(stateMagic):]); f != stateFormat {
		return nil, fmt.Errorf("saved usage of format %d: expected format %d", f, stateFormat)
	}
	size := binary.BigEndian.Uint64(h[len(stateMagic)+4:])
	if size > uint64(MaxStateFile-headerSize) {
		return nil, fmt.Errorf("saved usage of %d bytes: expected at most %d (MaxStateFile)", size, MaxStateFile-headerSize)
	}
	body, err := io.ReadAll(io.LimitReader(rd, int64(size)+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading saved usage: %w", err)
	case uint64(len(body)) < size:
		return nil, fmt.Errorf("saved usage truncated: %d bytes after the header, expected %d", len(body), size)
	case uint64(len(body)) > size:
		return nil, fmt.Errorf("saved usage followed by more bytes: expected %d after the header", size)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], h[headerSize-sha256.Size:]) {
		return nil, fmt.Errorf("saved usage changed since it was written: SHA-256 %x, expected %x", sum, h[headerSize-sha256.Size:])
	}
	return body, nil
}

// checkRestored is the first refresh's check of the sums RestoreState
// gave, at fingerprint fp; full says whether the refresh's own checks
// already refused them. It says whether to read the whole history, and
// keeps why for RestoreMismatch. Every mismatch is named: the identity
// costs two index lookups; the re-roll check, up to a day of rows (see
// rerolled), is left out when the sums are refused anyway. Refused sums
// are dropped at once: a refresh failing after the check must not find
// them at the next, unchecked.
func (r *Refresher) checkRestored(ctx context.Context, l Layout, fp uint64, full bool) (bool, error) {
	c := r.Cluster
	saved := r.restored
	var why []string
	if fp != r.fingerprint {
		why = append(why, "other decay settings (PriorityDecayHalfLife, PriorityCalcPeriod, the usage reset, PriorityFlags), TRES read (--collector.extended) or slurmdbd schema than it was saved with")
	} else if full {
		why = append(why, "its last decay pass, hourly rollup or watermark is later than the database's now (the clock or slurmdbd's rollups went back)")
	}
	id, err := c.identity(ctx, l)
	if err != nil {
		return false, err
	}
	if id.Created != saved.db.Created {
		why = append(why, fmt.Sprintf("cluster %s was created at %d in this database (cluster_table.creation_time), expected %d: another database, or the cluster added again", c.Name, id.Created, saved.db.Created))
	}
	if id.FirstHour != saved.db.FirstHour {
		why = append(why, fmt.Sprintf("the oldest rolled-up hour is %s, expected %s: another database, or hours purged", utc(id.FirstHour), utc(saved.db.FirstHour)))
	}
	if len(why) == 0 {
		rerolled, err := r.rerolled(ctx, l, saved.at)
		if err != nil {
			return false, err
		}
		if rerolled {
			why = append(why, fmt.Sprintf("slurmdbd re-rolled hours below its watermark (%s) since it was saved", utc(r.watermark)))
		}
	}
	r.restored = restoredState{mismatch: strings.Join(why, "; ")}
	if len(why) > 0 {
		r.frozen = usage.Frozen{}
	}
	return len(why) > 0, nil
}

func utc(t int64) string { return time.Unix(t, 0).UTC().Format(time.RFC3339) }

// RestoreMismatch says why the first refresh after RestoreState read the
// whole history instead of the sums it gave, once: "" before that
// refresh, when it used them, and at later calls.
func (r *Refresher) RestoreMismatch() string {
	why := r.restored.mismatch
	r.restored.mismatch = ""
	return why
}

// The hour rows written since a database time below the watermark (args:
// since, watermark), through the mod_time index (24.11+); and the rows of
// a span below it, with how many were written since (args: since, the
// span), through the time_start index (up to 23.02).
const (
	sqlRerolledByMod  = "SELECT COUNT(*) FROM `%[1]s_assoc_usage_hour_table` WHERE `mod_time` >= ? AND `time_start` < ?"
	sqlRerolledByTime = "SELECT COUNT(*), COALESCE(SUM(`mod_time` >= ?), 0) FROM `%[1]s_assoc_usage_hour_table` WHERE `time_start` >= ? AND `time_start` < ?"
)

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
	table := c.quoted("assoc_usage_hour_table")
	if l.hoursByModTime() {
		var newer int64
		err := c.db.query(ctx, "reading "+table, c.fill(sqlRerolledByMod), func(rows *sql.Rows) error {
			return rows.Scan(&newer)
		}, since, r.watermark)
		return newer > 0, err
	}
	for _, span := range []int64{3600, 86400} {
		var n, newer int64
		err := c.db.query(ctx, "reading "+table, c.fill(sqlRerolledByTime), func(rows *sql.Rows) error {
			return rows.Scan(&n, &newer)
		}, since, r.watermark-span, r.watermark)
		if err != nil || n > 0 {
			return newer > 0, err
		}
	}
	return true, nil
}
