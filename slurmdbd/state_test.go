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
// Before, the sums were decayed and the newly frozen hours added before
// the failure, and again at the next refresh.
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
// stopped, or other decay settings, mean a full load; a state that is not
// one, or another cluster's, is refused.
func TestRestoreState(t *testing.T) {
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
			if err := first.SaveState(&saved); err != nil {
				t.Fatal(err)
			}
			restored := func(p fairshare.Passes) *Refresher {
				t.Helper()
				r := &Refresher{Cluster: c, Passes: p, Location: time.UTC}
				if err := r.RestoreState(bytes.NewReader(saved.Bytes()), c.Name); err != nil {
					t.Fatal(err)
				}
				return r
			}

			// stopped for two hours, which slurmdbd rolled up
			rollHours(srv, db, 10)
			r := restored(passes)
			if got := matchesFullLoad(t, r, time.Unix(base+10*3600+600, 0)); got.Full || r.FullLoads != 0 {
				t.Errorf("restored: full %v, %d full loads: want incremental", got.Full, r.FullLoads)
			}
			if got := matchesFullLoad(t, r, time.Unix(base+10*3600+900, 0)); got.Full {
				t.Error("second refresh after the restore: full")
			}

			other := passes
			other.HalfLife = 12 * 3600
			if got := matchesFullLoad(t, restored(other), time.Unix(base+10*3600+600, 0)); !got.Full {
				t.Error("restored with another half-life: incremental, want a full load")
			}

			// slurmdbd re-rolled an hour below the saved watermark while
			// the exporter was stopped (late job records)
			srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_usage_hour_table SET alloc_secs = alloc_secs * 3, mod_time = UNIX_TIMESTAMP() WHERE time_start = %d", db, base+3600))
			if got := matchesFullLoad(t, restored(passes), time.Unix(base+10*3600+600, 0)); !got.Full {
				t.Error("restored after a re-roll below its watermark: incremental, want a full load")
			}

			for what, state := range map[string][]byte{"garbage": []byte("not a state"), "empty": nil} {
				r := &Refresher{Cluster: c, Passes: passes}
				if err := r.RestoreState(bytes.NewReader(state), c.Name); err == nil {
					t.Errorf("%s restored", what)
				}
			}
			if err := (&Refresher{}).RestoreState(bytes.NewReader(saved.Bytes()), "other"); err == nil || !strings.Contains(err.Error(), `expected cluster "other"`) {
				t.Errorf("another cluster's state: %v", err)
			}
		})
	}
}
