package engine

import (
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
)

// TestReferences: a report's lag reference is the last earlier read whose
// usage differs (taken before slurmctld's last pass), at most 3 periods
// old; its pass reference the first read after the last pass seen, at
// most a period old and only where its usage differs. serve and check's
// series take both from Reading.Follow.
func TestReferences(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	usage := func(v float64) map[drift.Key]float64 { return map[drift.Key]float64{{Account: "a"}: v} }
	read := func(id int, sec int, v float64, pass bool) *Reading {
		at := t0.Add(time.Duration(sec) * time.Second)
		return &Reading{ID: id, At: at, Start: at, End: at.Add(time.Second), Raw: usage(v), Pass: pass}
	}
	reads := []*Reading{
		read(1, 0, 100, false),
		read(2, 30, 100, false), // same usage: no evidence of a pass
		read(3, 60, 99, true),   // a pass: 1 and 2 came before it
		read(4, 70, 99.5, false),
		read(5, 400, 99.5, false), // 340 s after 3: past 3 periods, and past one since the pass
	}
	want := []struct {
		lag     int // ID of the lag reference (0: none)
		passRaw bool
	}{{0, false}, {0, false}, {2, false}, {3, true}, {0, false}}
	var prev *Reading
	for i, r := range reads {
		r.Follow(prev)
		prev = r
		lag := 0
		if ref := r.LagReference(time.Minute); ref != nil {
			lag = ref.ID
		}
		if lag != want[i].lag {
			t.Errorf("read %d: lag reference %d, want %d", r.ID, lag, want[i].lag)
		}
		if got := r.PassRaw(time.Minute) != nil; got != want[i].passRaw {
			t.Errorf("read %d: pass reference %v, want %v", r.ID, got, want[i].passRaw)
		}
	}
	// a zero period or an unknown moment: whatever the times (check's
	// series of files without '## <unix seconds>' lines)
	if ref := reads[4].LagReference(0); ref == nil || ref.ID != 3 {
		t.Errorf("period 0: lag reference %v, want read 3", ref)
	}
	if got := reads[4].PassRaw(0); got == nil {
		t.Error("period 0: pass reference dropped")
	}
}
