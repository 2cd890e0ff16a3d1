package check

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
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
		out, err := sshare.ParseFile(filepath.Join("..", "testdata", "slurm-22.05", "running-classic-1.txt"))
		if err != nil {
			t.Fatal(err)
		}
		out.FillMissingFactor(1)
		db, err := out.Tree()
		if err != nil {
			t.Fatal(err)
		}
		hank := -1
		for i := range db.Len() {
			if db.Association(i).User == "hank" {
				hank = i
			}
		}
		for i := hank; i >= 0; i = db.Association(i).Parent {
			out.Rows[i].RawUsage -= db.Association(hank).RawUsage
		}
		d := Database{Reported: out, Algorithm: fairshare.AlgorithmClassic, Tolerance: drift.DefaultTolerance}
		if seen {
			d.Losses = []result.UsageLoss{{AssocKey: result.AssocKey{Account: "grp", User: "hank"}, Kind: result.LossBetweenPasses, At: time.Unix(1_700_000_000, 0)}}
		}
		in := &build.Inputs{Name: "c", Settings: build.Settings{Algorithm: fairshare.AlgorithmClassic, Dampening: 1}, Database: build.Database{Tree: db, TieOrderKnown: true, Computed: time.Unix(1_700_000_000, 0), Phase: result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second}}, Options: build.Options{Tolerance: drift.DefaultTolerance}}
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
