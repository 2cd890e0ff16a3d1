package check

import (
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// TestCompareSides: check's policy for a lone read as slurmctld ran a
// pass. The database on either side of the pass differs by the pass's
// decay; the read is judged against the side more associations' RawUsage
// agrees with, and says which (real Slurm 22.05, running-classic-1.txt,
// as the report and as the side it shows).
func TestCompareSides(t *testing.T) {
	out, shown := classicCapture(t)
	other := edited(t, shown, func(assocs []fairshare.Association) {
		for i := range assocs {
			assocs[i].RawUsage *= 1.1 // the other side: a pass's decay away
		}
	})
	pass := time.Unix(1_700_000_000, 0)
	side := func(t *fairshare.Tree) *build.Inputs { return databaseSide(t, pass) }
	d := Database{Reported: out, Algorithm: fairshare.AlgorithmClassic, Tolerance: drift.DefaultTolerance}
	for _, tc := range []struct {
		before, after *fairshare.Tree
		want          string
	}{{other, shown, "judged as read after it"}, {shown, other, "judged as read before it"}} {
		rep, err := d.CompareSides(side(tc.before), side(tc.after), pass)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rep.Note, tc.want) {
			t.Errorf("note %q, want %q", rep.Note, tc.want)
		}
	}
}
