package engine

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/passes"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// TestStateFileOfItsBoot: priority_last_decay_ran gives the
// phase at a moment only if the boot of slurmctld that wrote it was
// running then; a past --at, or a file another boot wrote, leaves the
// phase unknown and says why, instead of taking today's phase (seen: a
// healthy 22.05 capture flagged once a newer slurmctld had written the
// file), unless the boot known at that moment gives it.
func TestStateFileOfItsBoot(t *testing.T) {
	dir := t.TempDir()
	ran := time.Unix(1_800_000_000, 0)
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(ran.Unix()))
	if err := os.WriteFile(filepath.Join(dir, "priority_last_decay_ran"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := &slurmconf.Config{ClusterName: "c", PriorityCalcPeriod: time.Minute, PriorityDecayHalfLife: time.Hour, PriorityUsageResetPeriod: "NONE"}
	for _, c := range []struct {
		name     string
		boot, at time.Time
		want     string
	}{
		{"live, boot known", ran.Add(-time.Hour), ran.Add(20 * time.Second), result.PhaseStateFile},
		{"live, boot unknown", time.Time{}, ran.Add(20 * time.Second), result.PhaseStateFile},
		{"a day back, boot known", ran.Add(-time.Hour), ran.Add(-24 * time.Hour), result.PhaseUnknown},
		{"a day back, boot unknown", time.Time{}, ran.Add(-24 * time.Hour), result.PhaseUnknown},
		// the boot alone gives the phase when nothing is read (a replay)
		{"the file of an earlier boot", ran.Add(time.Minute), ran.Add(2 * time.Minute), result.PhaseBoot},
		{"an hour after the file, boot unknown", time.Time{}, ran.Add(time.Hour), result.PhaseUnknown},
		// a start's first pass runs in its boot's second, and the file
		// holds whole seconds (24.05.8 after an outage: both 20:09:39)
		{"the first pass of the boot", ran.Add(400 * time.Millisecond), ran.Add(20 * time.Second), result.PhaseStateFile},
	} {
		e := New(conf, "", WithStateDir(dir))
		e.boot = c.boot
		_, _, phase, err := e.phase(conf, true, c.at)
		if phase.Source != c.want {
			t.Errorf("%s: phase %s, want %s", c.name, phase.Source, c.want)
		}
		if (c.want == result.PhaseUnknown) != (err != nil) {
			t.Errorf("%s: error %v: expected one exactly when the phase is unknown", c.name, err)
		}
	}
}

// TestBootPhase: slurmctld's passes fall within passes.BootPhase of its
// boot modulo the period, on every recording of real Slurm (22.05, 24.11,
// 26.05) that saved both its BOOT_TIME (scontrol show config, in the
// recording host's zone) and priority_last_decay_ran: the seed the phase
// tracker starts from (passes.PhaseTracker.SeedBoot).
func TestBootPhase(t *testing.T) {
	configs, err := filepath.Glob("../testdata/recordings/*/*/*/scontrol-show-config.txt")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../testdata/recordings/*/*/*/*/scontrol-show-config.txt")
	configs = append(configs, more...)
	n := 0
	for _, path := range configs {
		dir := filepath.Dir(path)
		ran, _, err := slurmstate.LastDecayRan(filepath.Join(dir, "state"))
		if err != nil {
			continue // recorded without the state file
		}
		tz, err := os.ReadFile(filepath.Join(dir, "zone"))
		if err != nil {
			t.Fatal(err)
		}
		loc, err := time.LoadLocationFromTZData("recorded", tz)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		boot, err := sshare.ParseBootTime(bytes.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		boot = time.Date(boot.Year(), boot.Month(), boot.Day(), boot.Hour(), boot.Minute(), boot.Second(), 0, loc)
		conf, err := slurmconf.Load(os.DirFS(dir), "slurm.conf")
		if err != nil {
			t.Fatal(err)
		}
		period := conf.PriorityCalcPeriod
		off := ran.Sub(boot) % period
		if off < 0 {
			off += period
		}
		// both stamped in whole seconds: a pass up to 2 s after the boot
		// shows as 0 or 1 s
		if off >= passes.BootPhase {
			t.Errorf("%s: last pass %v, boot %v: %v after the boot modulo %v, beyond %v", dir, ran, boot, off, period, passes.BootPhase)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("%d recordings with a boot time and a state file, want the 54 recorded", n)
	}
	t.Logf("%d recordings: every pass within %v of the boot's phase", n, passes.BootPhase)
}
