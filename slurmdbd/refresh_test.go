package slurmdbd

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// TestRefresherMatchesFullLoad: on the real 24.11 database, with rollups
// added hour by hour, every incremental refresh gives what reading the
// whole history gives, and it reads the whole history again only when
// slurmdbd rewinds its rollups: not when associations are added.
func TestRefresherMatchesFullLoad(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	byTime := releases[2]
	byTime.alter = "ALTER TABLE v2411_assoc_usage_hour_table DROP INDEX archive_purge, ADD INDEX (time_start)"
	for _, rel := range []release{releases[2], byTime} {
		t.Run(rel.alter, func(t *testing.T) { refresherMatchesFullLoad(t, srv, rel) })
	}
}

// refresherMatchesFullLoad runs on 24.11's hour table indexed by mod_time
// as it comes, and by time_start as up to 23.02.
func refresherMatchesFullLoad(t *testing.T, srv *mariadbtest.Server, rel release) {
	ctx := context.Background()
	_, c, db := openRelease(t, srv, rel)
	passes := fairshare.Passes{HalfLife: 6 * 3600, Period: 300, Phase: 18, ChargeJobEnd: true}
	r := &Refresher{Cluster: c, Passes: passes, Location: time.UTC}
	check := func(at time.Time, wantFull bool) {
		t.Helper()
		if got := matchesFullLoad(t, r, at); got.Full != wantFull {
			t.Errorf("at %v: full %v, want %v", at, got.Full, wantFull)
		}
	}
	rollTo := func(hours int) { rollHours(srv, db, hours) }
	rollTo(1)
	check(time.Unix(base+3600+600, 0), true)
	for h := 2; h <= 10; h++ { // hours pass the 6-hour re-read window and freeze
		rollTo(h)
		check(time.Unix(int64(base+h*3600+900), 0), false)
	}
	// a re-roll of an hour inside the re-read window (slurmdbd stamps
	// mod_time), then a row marked deleted, without a change of last_ran:
	// a steady refresh reads only the changed rows (recentHours), within
	// RecheckHours without a mod_time index
	recheck := int64(RecheckHours.Seconds())
	srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_usage_hour_table SET alloc_secs = alloc_secs * 3, mod_time = %d WHERE time_start = %d", db, base+11*3600, base+8*3600))
	check(time.Unix(int64(base+10*3600+900)+recheck, 0), false)
	srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_usage_hour_table SET deleted = 1, mod_time = %d WHERE time_start = %d AND id = 10", db, base+11*3600, base+9*3600))
	check(time.Unix(int64(base+10*3600+900)+2*recheck, 0), false)
	if r.FullLoads != 1 {
		t.Errorf("%d full loads, want 1", r.FullLoads)
	}
	// slurmdbd re-rolls after an outage: last_ran goes back, everything is
	// read again.
	srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_last_ran_table SET hourly_rollup = %d", db, base+3*3600))
	check(time.Unix(base+10*3600+3200, 0), true)
	// A new association (logged in txn_table, as slurmdbd does for
	// sacctmgr), then usage of it: still incremental, and the same as a
	// full load.
	srv.MustSQL(fmt.Sprintf("USE %s; INSERT INTO v2411_assoc_table (creation_time, mod_time, id_assoc, user, acct, parent_acct, id_parent, lineage, shares)"+
		" VALUES (1, 1, 500, '', 'newacct', 'root', 1, '/newacct/', 5); %s", db, logTxn))
	check(time.Unix(base+10*3600+3500, 0), false)
	srv.MustSQL(fmt.Sprintf("USE %s; INSERT INTO v2411_assoc_usage_hour_table VALUES (%d,%d,0,500,0,5,%d,777777); UPDATE v2411_last_ran_table SET hourly_rollup = %d",
		db, base+12*3600, base+12*3600, base+11*3600, base+12*3600))
	check(time.Unix(base+12*3600+300, 0), false)
	check(time.Unix(base+12*3600+600, 0), false)
	if r.FullLoads != 2 {
		t.Errorf("%d full loads, want 2 (the start and the rewind)", r.FullLoads)
	}

	// The association table is read again only when it changed (slurmdbd
	// logs the change in txn_table and sets mod_time): a shares edit is
	// seen at the next refresh. One written behind slurmdbd's back, with
	// nothing logged, is seen within RecheckHours, when the table is
	// scanned again.
	reads := r.AssocReads
	check(time.Unix(base+12*3600+900, 0), false)
	if r.AssocReads != reads {
		t.Errorf("unchanged association table read again")
	}
	srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_table SET shares = 66, mod_time = UNIX_TIMESTAMP() - 10 WHERE id_assoc = 500", db))
	check(time.Unix(base+12*3600+1000, 0), false)
	if r.AssocReads != reads {
		t.Errorf("an edit behind slurmdbd's back seen before RecheckHours")
	}
	r.assocs.scannedAt -= int64(RecheckHours.Seconds())
	check(time.Unix(base+12*3600+1100, 0), false)
	if r.AssocReads != reads+1 {
		t.Errorf("an edit behind slurmdbd's back not seen after RecheckHours")
	}
	srv.MustSQL(fmt.Sprintf("USE %s; UPDATE v2411_assoc_table SET shares = 77, mod_time = UNIX_TIMESTAMP() - 5 WHERE id_assoc = 500; %s", db, logTxn))
	reads = r.AssocReads
	got, err := r.Refresh(ctx, time.Unix(base+12*3600+1200, 0))
	if err != nil {
		t.Fatal(err)
	}
	shares := map[string]uint32{}
	for _, a := range got.Tree.Assocs {
		shares[a.Account+"/"+a.User] = a.Shares
	}
	if r.AssocReads != reads+1 || shares["newacct/"] != 77 {
		t.Errorf("after a shares edit: %d reads (want %d), shares %d (want 77)", r.AssocReads, reads+1, shares["newacct/"])
	}
}

// logTxn logs an administrator's change in txn_table, as slurmdbd does
// with every sacctmgr change (the action is DBD_MODIFY_ASSOCS' number).
const logTxn = "INSERT INTO txn_table (timestamp, action, name, actor, cluster) VALUES (UNIX_TIMESTAMP(), 1409, 'id_assoc=500', 'root', 'v2411')"

// base is 04:00 of the 24.11 capture, the hour after its real rollup.
const base = 1795320000

// rollHours writes the hours from base on as slurmdbd rolls them up
// (usage of id_assoc 10 and 11, mod_time after the hour) and moves
// last_ran to their end.
func rollHours(srv *mariadbtest.Server, db string, hours int) {
	var vals []string
	for k := 0; k < hours; k++ {
		for _, id := range []int{10, 11} {
			rolled := base + (k+1)*3600
			vals = append(vals, fmt.Sprintf("(%d,%d,0,%d,0,5,%d,%d)", rolled, rolled, id, base+k*3600, 1000*(k+1)*id))
		}
	}
	srv.MustSQL(fmt.Sprintf("USE %s; INSERT IGNORE INTO v2411_assoc_usage_hour_table VALUES %s; UPDATE v2411_last_ran_table SET hourly_rollup = %d",
		db, strings.Join(vals, ","), base+hours*3600))
}

// matchesFullLoad refreshes r at at and fails unless every association's
// usage is what reading the whole history gives.
func matchesFullLoad(t *testing.T, r *Refresher, at time.Time) *Snapshot {
	t.Helper()
	ctx := context.Background()
	got, err := r.Refresh(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.Cluster.Snapshot(ctx, at, r.Passes, r.Since, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tree.Assocs) != len(want.Tree.Assocs) {
		t.Fatalf("%d and %d associations", len(got.Tree.Assocs), len(want.Tree.Assocs))
	}
	for i := range want.Tree.Assocs {
		g, w := got.Tree.Assocs[i].RawUsage, want.Tree.Assocs[i].RawUsage
		if math.Abs(g-w) > 1e-9*math.Max(1, w) {
			t.Errorf("at %v, %s/%s: incremental %v, full %v", at, want.Tree.Assocs[i].Account, want.Tree.Assocs[i].User, g, w)
		}
	}
	return got
}
