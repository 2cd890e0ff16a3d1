package check

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// TestFactorBoundServeAsCheck: on an empty cluster (real Slurm 24.11
// before any job: every user tied, Fair Tree), the usage drift's fairshare
// bound is the same whether serve publishes it (build.Build with the
// report and the database's tree at its moment, whose tie order is known,
// while the Inputs published are a refresh's made before slurmctld's boot
// was learned) or check prints it (Database.Compare) for that moment, and
// lies in [0, 1]. Neither side's tie range is counted twice; when the tie
// order is unknown to both, the two ranges added are capped at 1.
func TestFactorBoundServeAsCheck(t *testing.T) {
	out, err := sshare.ParseFile(filepath.Join("..", "testdata", "slurm-24.11", "sshare-a-l-P-idle-fairtree.txt"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := out.Tree()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_795_320_600, 0)
	inputs := func(tieOrderKnown bool) *build.Inputs {
		return &build.Inputs{Name: "v2411", Settings: build.Settings{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1}, Database: build.Database{Tree: db, TieOrderKnown: tieOrderKnown, Computed: at, Phase: result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second}}, Options: build.Options{Tolerance: drift.DefaultTolerance}}
	}
	checked := func(tieOrderKnown bool) float64 {
		rep, err := Database{Reported: out, Algorithm: fairshare.AlgorithmFairTree, Tolerance: drift.DefaultTolerance}.Compare(inputs(tieOrderKnown))
		if err != nil {
			t.Fatal(err)
		}
		return float64(rep.Summary.MaxBound.FairShare)
	}
	atReport := inputs(true)
	served := inputs(false)
	served.Reported = &build.Reported{Out: out, At: at, DB: atReport.Tree, DBTieOrderKnown: atReport.TieOrderKnown, Pass: atReport.PassError(nil), Phase: atReport.Phase}
	cl, err := build.Build(served)
	if err != nil {
		t.Fatal(err)
	}
	serve := math.NaN()
	for _, d := range cl.Drift {
		if d.Kind == result.DriftUsage && d.Value == "fairshare" {
			serve = d.Bound
		}
	}
	check := checked(true)
	if serve != check || !(check > 0 && check <= 1) {
		t.Errorf("usage fairshare bound: serve %v, check %v: want them equal, in (0, 1] (every user tied: some rank range)", serve, check)
	}
	if unknown := checked(false); !(unknown >= check && unknown <= 1) {
		t.Errorf("with the tie order unknown, bound %v: want it in [%v, 1]", unknown, check)
	}
}
