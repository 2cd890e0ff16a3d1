package check

import (
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// TestCheckBlamesResetOnLossSeen: check in database mode notes a user's
// missing usage as a reset only when its reads across the pass saw the
// fall (Database.Losses, from engine.Tracker.ReadAcrossPass); read once,
// it says how much is missing and what it could not rule out. Real Slurm
// 22.05 (running-classic-1.txt) as the database's tree; the report is the
// same capture with hank's usage taken off him and his ancestors by hand,
// as sacctmgr ... set RawUsage=0 does in slurmctld.
func TestCheckBlamesResetOnLossSeen(t *testing.T) {
	for _, seen := range []bool{false, true} {
		out, in := hankReported(t, 0)
		db := in.Tree
		hank := find(db, "hank")
		for i := hank; i >= 0; i = db.Association(i).Parent {
			out.Rows[i].RawUsage -= db.Association(hank).RawUsage
		}
		d := Database{Reported: out, Algorithm: fairshare.AlgorithmClassic, Tolerance: drift.DefaultTolerance}
		if seen {
			d.Losses = []result.UsageLoss{{AssocKey: result.AssocKey{Account: "grp", User: "hank"}, Kind: result.LossBetweenPasses, At: time.Unix(1_700_000_000, 0)}}
		}
		rep, err := d.Compare(in)
		if err != nil {
			t.Fatal(err)
		}
		var notes string
		for _, e := range rep.Associations {
			if e.User == "hank" {
				notes = strings.Join(e.Notes, "; ")
			}
		}
		if got := strings.Contains(notes, "usage reset in slurmctld"); got != seen || !strings.Contains(notes, "billing-seconds less than the database records") {
			t.Errorf("loss seen %v: hank's notes %q", seen, notes)
		}
	}
}

// hankReported is real Slurm 22.05's running-classic-1.txt as the report
// and as the database's tree, in which hank's usage, and his ancestors',
// is changed by by times his own.
func hankReported(t *testing.T, by float64) (*shares.Table, *build.Inputs) {
	t.Helper()
	out, db := classicCapture(t)
	if by != 0 {
		hank := find(db, "hank")
		db = edited(t, db, func(assocs []fairshare.Association) {
			for i := hank; i >= 0; i = assocs[i].Parent {
				assocs[i].RawUsage += by * db.Association(hank).RawUsage
			}
		})
	}
	return out, databaseSide(db, time.Unix(1_700_000_000, 0))
}

// TestCheckSettling: check read live right after slurmctld started
// (Database.Settling, from the tracker's reads) measures usage slurmctld
// holds beyond the database's without judging it, as serve does: jobs
// that started just before slurmctld stopped reach slurmdbd only after it
// registers; usage slurmctld lacks is judged at once. Settled, both are
// flagged. The database's hank is changed, the report kept as real Slurm
// computed it.
func TestCheckSettling(t *testing.T) {
	for _, c := range []struct {
		by                float64 // the database's hank's usage changed by
		settling, flagged bool
	}{{-0.2, true, false}, {0.2, true, true}, {-0.2, false, true}} {
		out, in := hankReported(t, c.by)
		d := Database{Reported: out, Algorithm: fairshare.AlgorithmClassic, Tolerance: drift.DefaultTolerance, Settling: c.settling}
		rep, err := d.Compare(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rep.Associations {
			if flagged := e.Status == drift.StatusDrift; e.User == "hank" && flagged != c.flagged {
				t.Errorf("the database holds %+.0f%% of hank's usage, settling %v: flagged %v, want %v (%+v)", 100*c.by, c.settling, flagged, c.flagged, e)
			}
		}
	}
}
