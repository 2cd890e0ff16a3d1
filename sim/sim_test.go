package sim

import (
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/passes"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

// newAt is a simulation whose clock stands still at start: the tests
// advance it themselves.
func newAt(t *testing.T, c Config) *Cluster {
	t.Helper()
	if c.Associations == 0 {
		c.Associations = 400
	}
	c.Speed, c.History = 1e-9, History
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRebuildMatchesSlurmctld: healthy, the tables rebuilt as the
// exporter rebuilds a real database's (usage.Rebuild, through
// slurmdbd.Tables) give slurmctld's usage, stepped here pass by pass, at
// every moment: the demo raises no drift of its own. The two are
// independent derivations of priority_multifactor.c's charging.
func TestRebuildMatchesSlurmctld(t *testing.T) {
	s := newAt(t, Config{Start: time.Unix(1_800_000_000, 0)})
	passes := fairshare.Passes{HalfLife: s.conf.PriorityDecayHalfLife.Seconds(), Period: float64(s.period), Phase: float64(s.boot), ChargeJobEnd: true}
	worst := 0.0
	for step := range 40 {
		s.advance(s.t + 7*60 + int64(step)*13)
		snap, err := s.tables.Snapshot(time.Unix(s.t, 0), &slurmdbd.Refresher{Passes: passes, Location: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range snap.Tree.Assocs {
			if !a.IsUser() {
				continue
			}
			want := s.usage[snap.Rows[snap.Tree.Row[i]].ID-1]
			if d := math.Abs(a.RawUsage-want) / max(want, 1e4); d > worst {
				worst = d
				t.Logf("t=%d %s/%s: rebuilt %.1f, slurmctld %.1f (%.3g)", s.t, a.Account, a.User, a.RawUsage, want, d)
			}
		}
	}
	// the rebuild spreads a rolled-up hour evenly over it
	// (fairshare.Passes.BucketUsage: off by less than 0.693·Period/HalfLife
	// on an hour's edge intervals), and a job that ends at a pass's second
	// is charged before it here, so decayed once more (as much again)
	if most := 2 * 0.693 * passes.Period / passes.HalfLife; worst > most {
		t.Errorf("rebuilt usage off slurmctld's by up to %.3g: expected at most %.3g", worst, most)
	}
}

// TestPassesShowOnlyAtPasses: as real slurmctld's sshare, two reports
// show a decay pass (passes.Between, which the exporter's phase
// inference rests on) exactly when one fell between them: jobs' ends
// charged in between raise RawUsage only, accounts' normalized and
// effective usage are computed at passes.
func TestPassesShowOnlyAtPasses(t *testing.T) {
	s := newAt(t, Config{Start: time.Unix(1_800_000_000, 0)})
	prev, err := s.Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for range 300 {
		last := s.lastPass
		s.advance(s.t + 10)
		cur, err := s.Report(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := passes.Between(prev, cur, s.conf.EnforceLimits()), s.lastPass != last; got != want {
			t.Errorf("t=%d: pass seen %v, pass fell %v", s.t, got, want)
		}
		if s.lastPass != last {
			seen++
		}
		prev = cur
	}
	if seen != 10 {
		t.Errorf("%d passes in 3000 s: expected 10", seen)
	}
}
