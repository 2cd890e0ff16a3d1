package passes

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// capture is a real sshare capture of ../testdata.
func capture(t *testing.T, name string) *shares.Table {
	out, err := sshare.ParseFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// TestBetween tells a job end's charge (usage raised only) from a pass
// (decay, or an account's values computed again), on a real Fair Tree
// capture.
func TestBetween(t *testing.T) {
	const name = "slurm-22.05/idle-fairtree.txt"
	charged := capture(t, name)
	for i := range charged.Rows {
		if r := &charged.Rows[i]; r.User != "" && r.User != "root" && r.RawUsage > 0 {
			r.RawUsage += math.Round(0.4 * r.RawUsage)
			break
		}
	}
	if Between(capture(t, name), charged, true) {
		t.Error("a job end's charge taken for a decay pass")
	}
	// without limits nothing but a pass raises RawUsage: a young
	// cluster's, all from running jobs, only rises
	if !Between(capture(t, name), charged, false) {
		t.Error("without limits, usage raised not taken for a pass")
	}
	decayed := capture(t, name)
	for i := range decayed.Rows {
		decayed.Rows[i].RawUsage = math.Trunc(decayed.Rows[i].RawUsage * 0.99)
	}
	if !Between(capture(t, name), decayed, true) {
		t.Error("decay not taken for a pass")
	}
	// the first pass that charges anything lowers nothing (no usage
	// before): the values it computes show it
	computed := capture(t, name)
	for i := range computed.Rows {
		if r := &computed.Rows[i]; r.User == "" && r.Depth == 1 {
			r.NormUsage += 0.01
			break
		}
	}
	if !Between(capture(t, name), computed, true) {
		t.Error("an account's NormUsage computed again not taken for a pass")
	}
}
