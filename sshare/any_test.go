package sshare

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// TestSeries: a file of '## <unix seconds>' snapshots yields each one
// with its line and moment, an empty one flagged, and a bad heading is an
// error naming the file and line; a file without headings is one listing.
func TestSeries(t *testing.T) {
	listing, err := os.ReadFile("../testdata/slurm-24.11/sshare-a-l-P.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) string { return testenv.WriteFile(t, dir, name, text) }
	n := strings.Count(string(listing), "\n")
	series := write("series.txt", "\ufeff\n## 100\n"+string(listing)+"## 130\n\n## 160\n"+string(listing))
	var got []Snapshot
	for snap, err := range Series(series, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, snap)
	}
	if len(got) != 3 {
		t.Fatalf("%d snapshots, want 3", len(got))
	}
	for k, want := range []struct {
		line  int
		at    int64
		empty bool
	}{{2, 100, false}, {3 + n, 130, true}, {5 + n, 160, false}} {
		s := got[k]
		if s.Line != want.line || s.At.Unix() != want.at || s.Empty != want.empty || (s.Table == nil) != want.empty {
			t.Errorf("snapshot %d: line %d at %d empty %v table %v: want line %d at %d empty %v", k+1, s.Line, s.At.Unix(), s.Empty, s.Table != nil, want.line, want.at, want.empty)
		}
	}
	one := write("one.txt", string(listing))
	for snap, err := range Series(one, nil) {
		if err != nil || snap.Line != 0 || !snap.At.IsZero() || snap.Table == nil || len(snap.Table.Rows) == 0 {
			t.Errorf("one listing: %+v, %v", snap, err)
		}
	}
	bad := write("bad.txt", "## 100\n"+string(listing)+"## soon\n")
	var last error
	for _, err := range Series(bad, nil) {
		last = err
	}
	if want := fmt.Sprintf("bad.txt line %d", 2+n); last == nil || !strings.Contains(last.Error(), want) || !strings.Contains(last.Error(), "expected '## <unix seconds>'") {
		t.Errorf("bad heading: %v", last)
	}
}
