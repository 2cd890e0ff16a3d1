package slurmdbd

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// TestRefreshFailsCleanly: a refresh that fails after reading part of what
// it needs (the job table locked once the hours were read, so its query
// times out) leaves the frozen sums as they were: the next refresh is
// still incremental and still what reading the whole history gives.
// Sums decayed and newly frozen hours added before the failure would be
// decayed and added again by the next refresh.
func TestRefreshFailsCleanly(t *testing.T) {
	ctx := context.Background()
	srv := mariadbtest.Start(t, "")
	_, c, db := openRelease(t, srv, releases[2])
	d, err := Open(ctx, srv.DSN("reader", "s3cret", db), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c.db = d
	// finished jobs' tails are read from the job table
	r := &Refresher{Cluster: c, Passes: fairshare.Passes{HalfLife: 6 * 3600, Period: 300, Phase: 18}, Location: time.UTC}
	rollHours(srv, db, 8)
	matchesFullLoad(t, r, time.Unix(base+8*3600+300, 0))
	rollHours(srv, db, 9)
	root, err := sql.Open("mysql", srv.DSN("root", "", db))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	lock, err := root.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "LOCK TABLES v2411_job_table WRITE"); err != nil {
		t.Fatal(err)
	}
	// within RecheckHours of the last refresh: the layout is not read again
	if _, err := r.Refresh(ctx, time.Unix(base+8*3600+600, 0)); err == nil || !strings.Contains(err.Error(), "job_table") {
		t.Fatalf("a refresh with the job table locked: %v, want its query to time out", err)
	}
	lock.ExecContext(ctx, "UNLOCK TABLES")
	lock.Close()
	if got := matchesFullLoad(t, r, time.Unix(base+9*3600+300, 0)); got.Full {
		t.Error("the refresh after a failed one read the whole history: want incremental")
	}
}

// TestRestoreState: frozen sums saved by one Refresher and restored by a
// new one, as across a restart, give an incremental first refresh equal to
// a full load, on 24.11's hour table (mod_time index) and on one indexed
// by time_start as up to 23.02; a re-roll below the watermark while
// stopped, other decay settings, or another database holding a cluster of
// the same name mean a full load, and RestoreMismatch says which; a state
// that is not one, another cluster's, or not as written is refused.
func TestRestoreState(t *testing.T) {
	ctx := context.Background()
	srv := mariadbtest.Start(t, "")
	byTime := releases[2]
	byTime.alter = "ALTER TABLE v2411_assoc_usage_hour_table DROP INDEX archive_purge, ADD INDEX (time_start)"
	for _, rel := range []release{releases[2], byTime} {
		t.Run(rel.alter, func(t *testing.T) {
			_, c, db := openRelease(t, srv, rel)
			passes := fairshare.Passes{HalfLife: 6 * 3600, Period: 300, Phase: 18, ChargeJobEnd: true}
			rollHours(srv, db, 8)
			first := &Refresher{Cluster: c, Passes: passes, Location: time.UTC}
			matchesFullLoad(t, first, time.Unix(base+8*3600+600, 0))
			var saved bytes.Buffer
			if err := first.SaveState(ctx, &saved); err != nil {
				t.Fatal(err)
			}
			restoredIn := func(c Cluster, p fairshare.Passes) *Refresher {
				t.Helper()
				r := &Refresher{Cluster: c, Passes: p, Location: time.UTC}
				if err := r.RestoreState(bytes.NewReader(saved.Bytes()), c.Name); err != nil {
					t.Fatal(err)
				}
				return r
			}
			restored := func(p fairshare.Passes) *Refresher { return restoredIn(c, p) }
			// a full load at the first refresh, RestoreMismatch naming want
			refused := func(r *Refresher, what, want string) {
				t.Helper()
				if got := matchesFullLoad(t, r, time.Unix(base+10*3600+600, 0)); !got.Full {
					t.Errorf("restored %s: incremental, want a full load", what)
				}
				if why := r.RestoreMismatch(); !strings.Contains(why, want) {
					t.Errorf("restored %s: mismatch %q, want it to name %q", what, why, want)
				}
			}

			// stopped for two hours, which slurmdbd rolled up
			rollHours(srv, db, 10)
			r := restored(passes)
			if got := matchesFullLoad(t, r, time.Unix(base+10*3600+600, 0)); got.Full || r.FullLoads != 0 {
				t.Errorf("restored: full %v, %d full loads: want incremental", got.Full, r.FullLoads)
			}
			if why := r.RestoreMismatch(); why != "" {
				t.Errorf("restored and used: mismatch %q", why)
			}
			if got := matchesFullLoad(t, r, time.Unix(base+10*3600+900, 0)); got.Full {
				t.Error("second refresh after the restore: full")
			}

			other := passes
			other.HalfLife = 12 * 3600
			refused(restored(other), "with another half-life", "decay settings")

			// Another database holding a cluster of the same name, its
			// usage below the watermark different and written before the
			// state was saved (no re-roll to see): another creation, or
			// another first hour.
			for what, change := range map[string]string{
				"creation_time":         "UPDATE cluster_table SET creation_time = creation_time + 86400",
				"oldest rolled-up hour": fmt.Sprintf("INSERT INTO v2411_assoc_usage_hour_table VALUES (%d,%d,0,10,0,5,%d,777000)", base-23*3600, base-23*3600, base-24*3600),
			} {
				_, oc, odb := openRelease(t, srv, rel)
				rollHours(srv, odb, 10)
				srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_usage_hour_table SET alloc_secs = alloc_secs * 5 WHERE time_start < %d; %s", odb, base+3*3600, change))
				refused(restoredIn(oc, passes), "into another database", what)
				// dropped when refused: a refresh that fails after the
				// check must not leave them to the next
				r := restoredIn(oc, passes)
				l, err := oc.Layout(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if full, err := r.checkRestored(ctx, l, r.fingerprint, false); err != nil || !full || r.frozen.Usage != nil {
					t.Errorf("restored into another database: checked full %v, %v, sums kept %v", full, err, r.frozen.Usage != nil)
				}
			}

			// slurmdbd re-rolled an hour below the saved watermark while
			// the exporter was stopped (late job records)
			srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_usage_hour_table SET alloc_secs = alloc_secs * 3, mod_time = UNIX_TIMESTAMP() WHERE time_start = %d", db, base+3600))
			refused(restored(passes), "after a re-roll below its watermark", "re-rolled")

			// a bit of the body changed (TestStorageChecked changes a
			// value's, which still decodes)
			flipped := bytes.Clone(saved.Bytes())
			flipped[saved.Len()-2] ^= 1
			oversized := bytes.Clone(saved.Bytes())
			oversized[len(stateMagic)+4] = 0x7f
			for what, tc := range map[string]struct {
				state []byte
				want  string
			}{
				"garbage":               {[]byte("not a state"), "not a saved usage state"},
				"empty":                 {nil, "not a saved usage state"},
				"a gob alone":           {saved.Bytes()[headerSize:], "not a saved usage state"},
				"a bit changed":         {flipped, "changed since it was written: SHA-256"},
				"truncated":             {saved.Bytes()[:saved.Len()-10], fmt.Sprintf("truncated: %d bytes after the header, expected %d", saved.Len()-headerSize-10, saved.Len()-headerSize)},
				"a truncated header":    {saved.Bytes()[:headerSize-1], "truncated"},
				"followed by more":      {append(bytes.Clone(saved.Bytes()), 0), "followed by more bytes"},
				"a length past the cap": {oversized, "expected at most"},
			} {
				r := &Refresher{Cluster: c, Passes: passes}
				if err := r.RestoreState(bytes.NewReader(tc.state), c.Name); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s restored: %v, want an error saying %q", what, err, tc.want)
				}
			}
			if err := (&Refresher{}).RestoreState(bytes.NewReader(saved.Bytes()), "other"); err == nil || !strings.Contains(err.Error(), `expected cluster "other"`) {
				t.Errorf("another cluster's state: %v", err)
			}
		})
	}
}
