package drift

import (
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// TestAmbiguousReportRefused: on real Slurm 22.05's tree, where erin has
// two associations in account exp that differ only by partition (p1, p2),
// `sshare -a -l -P` without -m (idle-fairtree.txt, captured beside
// idle-fairtree-m.txt) prints both as "exp|erin": compared with the
// database's tree (read here from the -m capture of the same moment) each
// row may be either association, and CompareReport refuses it, naming the
// rows, the associations and the listing that tells them apart, instead of
// matching them in order. The -m capture of the same moment compares.
func TestAmbiguousReportRefused(t *testing.T) {
	withPartitions := capture(t, "slurm-22.05/idle-fairtree-m.txt")
	db, err := withPartitions.Tree()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		want []string // in the error; none: no error
	}{
		{"slurm-22.05/idle-fairtree-m.txt", nil},
		{"slurm-22.05/idle-fairtree.txt", []string{"line 21", "line 22", `user "erin"`, "exp/erin/p1", "exp/erin/p2", "sshare -a -l -P -m", "sshare --json"}},
	} {
		in := Input{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1, Tolerance: DefaultTolerance, DB: db, TieOrderKnown: true, Report: capture(t, tc.file)}
		_, err := CompareReport(in, true)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.file, err)
		case tc.want != nil && err == nil:
			t.Errorf("%s: compared, want the ambiguous rows refused", tc.file)
		case tc.want != nil:
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not name %q", tc.file, err, w)
				}
			}
			if strings.Contains(err.Error(), "line 20") || strings.Contains(err.Error(), "dave") {
				t.Errorf("%s: error %q names rows that are not ambiguous", tc.file, err)
			}
		}
	}
}
