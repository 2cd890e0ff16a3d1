package engine

import (
	"math"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// TestUsageLosses: between two reads slurmctld's RawUsage only
// decays and rises; a user's fall beyond decay over the reads' span and a
// pass, and sshare's truncation, is a loss, counted by kind; an account
// falling with its user, a usage reset zeroing root, and plain decay are
// not.
func TestUsageLosses(t *testing.T) {
	const period = time.Minute
	d := fairshare.Passes{HalfLife: 3600}.D()
	t0 := time.Unix(1_800_000_000, 0)
	boot := t0.Add(-time.Hour)
	read := func(at time.Time, boot time.Time, root, acct, alice, bob float64) *Reading {
		out := &shares.Table{Rows: []shares.Row{{Account: "root"}, {Account: "phys", Depth: 1}, {Account: "phys", User: "alice", Depth: 2}, {Account: "phys", User: "bob", Depth: 2}}}
		raw := map[result.AssocKey]float64{{Account: "root"}: root, {Account: "phys"}: acct, {Account: "phys", User: "alice"}: alice, {Account: "phys", User: "bob"}: bob}
		return &Reading{Out: out, Raw: raw, Start: at, End: at.Add(time.Second), At: at.Add(time.Second / 2), Boot: boot}
	}
	decayed := func(v float64) float64 { return math.Floor(v * math.Pow(d, 61)) }
	prev := read(t0, boot, 100000, 100000, 80000, 20000)
	for _, c := range []struct {
		name string
		cur  *Reading
		want []string // user/kind
	}{
		{"a pass's decay", read(t0.Add(time.Minute), boot, decayed(100000), decayed(100000), decayed(80000), decayed(20000)), nil},
		{"bob 10% lower", read(t0.Add(time.Minute), boot, decayed(100000)-2000, decayed(100000)-2000, decayed(80000), decayed(20000)-2000), []string{"bob/" + result.LossBetweenPasses}},
		{"bob reset to 0", read(t0.Add(time.Minute), boot, decayed(80000), decayed(80000), decayed(80000), 0), []string{"bob/" + result.LossBetweenPasses}},
		{"a usage reset", read(t0.Add(time.Minute), boot, 0, 0, 0, 0), nil},
		{"restored from an older state", read(t0.Add(time.Minute), t0.Add(30*time.Second), decayed(100000)-5000, decayed(100000)-5000, decayed(80000)-5000, decayed(20000)),
			[]string{"alice/" + result.LossAcrossRestart}},
		{"usage risen by jobs", read(t0.Add(time.Minute), boot, 110000, 110000, 85000, 25000), nil},
	} {
		got := UsageLosses(prev, c.cur, d, period, true)
		var names []string
		for _, x := range got {
			names = append(names, x.User+"/"+x.Kind)
		}
		if len(names) != len(c.want) || (len(names) > 0 && names[0] != c.want[0]) {
			t.Errorf("%s: losses %v, want %v", c.name, names, c.want)
		}
	}
	// without resets, or across a restart, usage zeroed is lost
	zeroed := read(t0.Add(time.Minute), boot, 0, 0, 0, 0)
	if got := UsageLosses(prev, zeroed, d, period, false); len(got) != 2 {
		t.Errorf("every user zeroed, no PriorityUsageResetPeriod: %d losses, want 2", len(got))
	}
	zeroed.Boot = t0.Add(30 * time.Second)
	if got := UsageLosses(prev, zeroed, d, period, true); len(got) != 2 || got[0].Kind != result.LossAcrossRestart {
		t.Errorf("every user zeroed across a restart: %+v, want 2 across_restart", got)
	}
}
