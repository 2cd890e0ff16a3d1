package check

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// classicCapture is real Slurm 22.05's running-classic-1.txt: the report,
// and the tree it shows, which the tests take as the database's.
func classicCapture(t *testing.T) (*shares.Table, *fairshare.Tree) {
	t.Helper()
	out, err := sshare.ParseFile(filepath.Join("..", "testdata", "slurm-22.05", "running-classic-1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out.FillMissingFactor(1)
	tree, err := out.Tree()
	if err != nil {
		t.Fatal(err)
	}
	return out, tree
}

// edited is tree with its associations changed by edit.
func edited(t *testing.T, tree *fairshare.Tree, edit func([]fairshare.Association)) *fairshare.Tree {
	t.Helper()
	assocs := make([]fairshare.Association, tree.Len())
	for i := range assocs {
		assocs[i] = tree.Association(i)
	}
	edit(assocs)
	out, err := fairshare.NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// databaseSide is check's database side holding tree, classic, computed
// at computed, the phase from the state file.
func databaseSide(tree *fairshare.Tree, computed time.Time) *build.Inputs {
	return &build.Inputs{Name: "c", Settings: build.Settings{Algorithm: fairshare.AlgorithmClassic, Dampening: 1},
		Database: build.Database{Tree: tree, TieOrderKnown: true, Computed: computed, Phase: result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second}},
		Options:  build.Options{Tolerance: drift.DefaultTolerance}}
}

// find is the index of user's association in t.
func find(t *fairshare.Tree, user string) int {
	for i := range t.Len() {
		if t.Association(i).User == user {
			return i
		}
	}
	return -1
}
