package passes

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"
)

const simPeriod = 60 * time.Second

var simBase = time.Date(2024, 3, 1, 12, 0, 7, 123_000_000, time.UTC)

// phaseSim is a simulated slurmctld: the usage fingerprint counts the changes
// (passes and spurious ones) at or before a moment.
type phaseSim struct{ changes []time.Time }

// addPasses adds passes at phase+k·P within [from, to).
func (s *phaseSim) addPasses(phase, from, to time.Time) {
	t := phase.Add(phaseFloor(from.Sub(phase), simPeriod) * simPeriod)
	for ; t.Before(to); t = t.Add(simPeriod) {
		if !t.Before(from) {
			s.add(t)
		}
	}
}

func (s *phaseSim) add(t time.Time) {
	s.changes = append(s.changes, t)
	sort.Slice(s.changes, func(i, j int) bool { return s.changes[i].Before(s.changes[j]) })
}

func (s *phaseSim) usage(t time.Time) uint64 {
	return uint64(sort.Search(len(s.changes), func(i int) bool { return s.changes[i].After(t) }))
}

// phaseDriver reads the simulation when the tracker says to.
type phaseDriver struct {
	t          *testing.T
	p          *PhaseTracker
	s          *phaseSim
	dur        time.Duration
	interval   time.Duration
	rnd        *rand.Rand
	start, end time.Time
	reads      int
}

func newPhaseDriver(t *testing.T, s *phaseSim, dur time.Duration) *phaseDriver {
	d := &phaseDriver{t: t, p: &PhaseTracker{Period: simPeriod, Confirm: 1}, s: s, dur: dur, interval: simPeriod, rnd: rand.New(rand.NewSource(1))}
	d.read(simBase)
	return d
}

// read takes sshare's snapshot anywhere within the read: brackets must hold
// whichever moment it is.
func (d *phaseDriver) read(at time.Time) {
	d.start, d.end = at, at.Add(d.dur)
	snap := at.Add(time.Duration(d.rnd.Int63n(int64(d.dur) + 1)))
	d.p.Observe(d.start, d.end, d.s.usage(snap))
	d.reads++
}

func (d *phaseDriver) next() time.Time {
	next := d.p.Next(d.start, d.end, d.interval)
	if next.Before(d.end.Add(phaseMinGap)) {
		d.t.Fatalf("Next = %v, before last end %v + %v", next, d.end, phaseMinGap)
	}
	return next
}

func (d *phaseDriver) step() { d.read(d.next()) }

// holds reports whether a pass at phase+k·P lies within Pass's window.
func (d *phaseDriver) holds(phase time.Time) bool {
	pass, unc, ok := d.p.Pass(d.end)
	if !ok || pass.After(d.end) {
		return false
	}
	off := pass.Sub(phase) - phaseRound(pass.Sub(phase), simPeriod)*simPeriod
	return off.Abs() <= unc
}

// pin reads until pinned, checking from the first bracket on that the window
// holds phase; it returns how many periods that took.
func (d *phaseDriver) pin(phase time.Time, within int) float64 {
	from := d.start
	for !d.p.Pinned() {
		if d.start.Sub(from) > time.Duration(within)*simPeriod {
			d.t.Fatalf("not pinned within %d periods", within)
		}
		d.step()
		if _, _, ok := d.p.Pass(d.end); ok && !d.holds(phase) {
			pass, unc, _ := d.p.Pass(d.end)
			d.t.Fatalf("at %v: pass %v ± %v misses phase %v", d.end, pass, unc, phase)
		}
	}
	return float64(d.start.Sub(from)) / float64(simPeriod)
}

// runUntil makes the reads that start before t.
func (d *phaseDriver) runUntil(t time.Time, each func()) {
	for next := d.next(); next.Before(t); next = d.next() {
		d.read(next)
		if each != nil {
			each()
		}
	}
}

func TestPhasePins(t *testing.T) {
	for _, dur := range []time.Duration{50 * time.Millisecond, 2 * time.Second} {
		t.Run(dur.String(), func(t *testing.T) {
			phase := simBase.Add(37*time.Second + 400*time.Millisecond)
			s := &phaseSim{}
			s.addPasses(phase, simBase, simBase.Add(30*simPeriod))
			d := newPhaseDriver(t, s, dur)
			periods := d.pin(phase, 6)
			t.Logf("read duration %v: pinned after %.2f periods", dur, periods)
			d.runUntil(d.start.Add(10*simPeriod), func() {
				if !d.p.Pinned() || !d.holds(phase) {
					t.Fatalf("at %v: lost the phase (pinned %v)", d.end, d.p.Pinned())
				}
			})
		})
	}
}

// One read per period always straddles exactly one pass, so every bracket is a
// whole period wide: with reads taking time it is wider than a period and says
// nothing; with instant reads it is exactly a period, ±P/2. Reads at a fixed
// P/3 bracket each pass at the same offset every period: the phase is found
// but the window never narrows below P/3, so it is never pinned.
func TestPhaseFixedInterval(t *testing.T) {
	phase := simBase.Add(37 * time.Second)
	for _, c := range []struct {
		every, dur time.Duration
		want       string
	}{
		{simPeriod, 50 * time.Millisecond, "unknown"},
		// instant reads a period apart: each bracket a whole period
		// wide overlaps two occurrences of the first and narrows nothing
		{simPeriod, 0, "unknown"},
		{simPeriod / 3, 50 * time.Millisecond, "found"},
	} {
		s := &phaseSim{}
		s.addPasses(phase, simBase, simBase.Add(20*simPeriod))
		d := newPhaseDriver(t, s, c.dur)
		for i := 1; i < 10*int(simPeriod/c.every); i++ {
			d.read(simBase.Add(time.Duration(i) * c.every))
			if d.p.Pinned() {
				t.Fatalf("every %v: pinned after %d reads", c.every, i)
			}
		}
		_, unc, ok := d.p.Pass(d.end)
		var got string
		switch {
		case !ok:
			got = "unknown"
		case unc >= simPeriod/2:
			got = "vague"
		case d.holds(phase) && unc >= simPeriod/6:
			got = "found"
		}
		if got != c.want {
			t.Errorf("every %v, reads of %v: ok %v ± %v (%q), want %q", c.every, c.dur, ok, unc, got, c.want)
		}
	}
}

func TestPhaseRestart(t *testing.T) {
	oldPhase := simBase.Add(37 * time.Second)
	s := &phaseSim{}
	d := newPhaseDriver(t, s, 50*time.Millisecond)
	s.addPasses(oldPhase, simBase, simBase.Add(100*simPeriod)) // those after the restart are dropped below
	d.pin(oldPhase, 7)
	d.runUntil(d.start.Add(2*simPeriod), nil)

	// Restart 10 s after a pass; passes resume 23 s later in the period.
	restart := oldPhase.Add((phaseFloor(d.end.Sub(oldPhase), simPeriod)+1)*simPeriod + 10*time.Second)
	newPhase := oldPhase.Add(23 * time.Second)
	s.changes = s.changes[:s.usage(restart)]
	s.addPasses(newPhase, restart, restart.Add(100*simPeriod))

	// One read a period, just after each pass, brackets every pass a
	// period wide, which fits any phase: the pair either side of a pass
	// that the reads make once in confirmEvery periods finds the restart.
	// The first conflicting bracket keeps the window but puts it in
	// doubt: Pass says unknown, so that usage is judged against the whole
	// period rather than a wrong phase...
	var doubted time.Time
	d.runUntil(restart.Add((confirmEvery+1)*simPeriod), func() {
		if d.p.Doubted() && doubted.IsZero() {
			doubted = d.end
			if _, _, ok := d.p.Pass(d.end); !d.p.Pinned() || ok {
				t.Fatalf("one conflicting bracket: pinned %v, phase known %v: want the window kept, the phase in doubt", d.p.Pinned(), ok)
			}
		}
		if _, _, ok := d.p.Pass(d.end); ok && !d.holds(oldPhase) && !d.holds(newPhase) {
			t.Fatalf("at %v: a phase known that is neither", d.end)
		}
	})
	if doubted.IsZero() {
		t.Fatalf("the restart not seen within %d periods", confirmEvery+1)
	}
	// ...the second replaces the window, which a third bracket confirms
	// (one bracket alone may be a change outside a pass).
	d.runUntil(doubted.Add(3*simPeriod), func() {
		if _, _, ok := d.p.Pass(d.end); ok && !d.holds(newPhase) {
			t.Fatalf("at %v: the old phase still known after the restart was seen", d.end)
		}
	})
	periods := d.pin(newPhase, 8)
	t.Logf("restart seen after %.1f periods; pinned again %.1f periods later", float64(doubted.Sub(restart))/float64(simPeriod),
		3+periods)
}

// TestPhaseBootSeed: slurmctld's boot tells where its passes fall
// (BootPhase); a bracket that agrees makes the phase known at the first
// pass, as wide as the bracket (the boot's window is a belief: 22.05 with
// 10,000 associations passed at boot+3 s, past it), and the next pass
// pins it, with at most three reads a period. A boot the passes do not
// follow (a tree that took long to load) never yields a wrong phase.
func TestPhaseBootSeed(t *testing.T) {
	for _, c := range []struct {
		name          string
		offset        time.Duration // of the passes from the boot
		dur           time.Duration
		known, pinned float64 // within, in periods
	}{
		{"on time", 1400 * time.Millisecond, 50 * time.Millisecond, 1.1, 2.1},
		{"on time, slow sshare", 400 * time.Millisecond, 2 * time.Second, 1.1, 2.1},
		{"just late", 3200 * time.Millisecond, time.Second, 1.1, 2.1},
		{"just late, slow sshare", 3 * time.Second, 2 * time.Second, 1.1, 2.1},
		{"late", 6 * time.Second, time.Second, 8, 8},
		{"slow start", 25 * time.Second, 50 * time.Millisecond, 8, 8},
	} {
		for _, at := range []time.Duration{0, 20 * time.Second, 50 * time.Second} {
			t.Run(fmt.Sprintf("%s, start %v after the boot's phase", c.name, at), func(t *testing.T) {
				start := simBase.Add(at)
				boot := simBase.Add(-17 * time.Minute)
				phase := boot.Add(c.offset)
				s := &phaseSim{}
				s.addPasses(phase, start.Add(-simPeriod), start.Add(30*simPeriod))
				d := &phaseDriver{t: t, p: &PhaseTracker{Period: simPeriod, Confirm: 1}, s: s, dur: c.dur, interval: simPeriod, rnd: rand.New(rand.NewSource(1))}
				d.p.SeedBoot(boot)
				d.read(start)
				var known time.Duration
				for {
					if _, _, ok := d.p.Pass(d.end); ok {
						if !d.holds(phase) {
							pass, u, _ := d.p.Pass(d.end)
							t.Fatalf("at %v: the phase known (%v ± %v) misses the passes", d.end.Sub(start), pass.Sub(boot)%simPeriod, u)
						}
						if known == 0 {
							known = d.end.Sub(start)
						}
						if d.p.Pinned() {
							break
						}
					}
					if el := d.end.Sub(start); known == 0 && el > time.Duration(c.known*float64(simPeriod)) || el > time.Duration(c.pinned*float64(simPeriod)) {
						t.Fatalf("at %v: known after %v, not pinned (within %.1f and %.1f periods)", el, known, c.known, c.pinned)
					}
					d.step()
				}
				if per := float64(d.reads) / (float64(d.end.Sub(start))/float64(simPeriod) + 1); per > 3 {
					t.Errorf("%d reads in %v: %.1f a period", d.reads, d.end.Sub(start), per)
				}
				t.Logf("known after %v, pinned after %v, %d reads", known.Round(time.Second), d.end.Sub(start).Round(time.Second), d.reads)
			})
		}
	}
}

func TestPhaseSpuriousChange(t *testing.T) {
	phase := simBase.Add(37 * time.Second)
	s := &phaseSim{}
	s.addPasses(phase, simBase, simBase.Add(30*simPeriod))
	d := newPhaseDriver(t, s, 50*time.Millisecond)
	d.pin(phase, 7)
	d.runUntil(d.start.Add(simPeriod), nil)
	before, unc, _ := d.p.Pass(d.end)

	// A job end charged halfway between passes.
	s.add(before.Add(simPeriod + simPeriod/2))
	d.runUntil(d.start.Add(3*simPeriod), nil)
	after, unc2, _ := d.p.Pass(d.end)
	if off := after.Sub(before) % simPeriod; !d.p.Pinned() || off != 0 || unc2 != unc {
		t.Fatalf("window moved by %v, uncertainty %v → %v (pinned %v)", off, unc, unc2, d.p.Pinned())
	}
}

func TestPhaseNextPace(t *testing.T) {
	// A read longer than the interval still leaves the minimum gap.
	longRead := func(p *PhaseTracker, what string) {
		start := simBase.Add(100 * simPeriod)
		end := start.Add(simPeriod + 7*time.Second)
		if got := p.Next(start, end, simPeriod); got.Before(end.Add(phaseMinGap)) {
			t.Errorf("%s: Next after a long read = %v, %v before its end", what, got, end.Sub(got))
		}
	}
	longRead(&PhaseTracker{Period: simPeriod}, "no window")

	phase := simBase.Add(11 * time.Second)
	s := &phaseSim{}
	s.addPasses(phase, simBase, simBase.Add(30*simPeriod))
	d := newPhaseDriver(t, s, 50*time.Millisecond)
	d.pin(phase, 7)
	longRead(d.p, "pinned")
	reads := d.reads
	d.runUntil(d.start.Add(20*simPeriod), nil) // step checks the minimum gap
	if n := d.reads - reads; n > 20 || n < 19 {
		t.Errorf("%d reads over 20 pinned periods, want one a period", n)
	}
}

// TestPhaseOperatorInterval: --reported.interval shorter than a third of
// the period is an operator asking for more reads than the three a period
// the schedule allows itself: no read waits longer than it, whether the
// phase is unknown, seeded by the boot, known or quiet (CI found serve
// reading a hung sshare 50 s after the last good read at a 3 s interval).
// A third of the period or more keeps the cap.
func TestPhaseOperatorInterval(t *testing.T) {
	for _, c := range []struct {
		name     string
		interval time.Duration
		seed     bool
		quiet    bool // the usage never changes
	}{
		{"unknown", 3 * time.Second, false, false},
		{"boot", 3 * time.Second, true, false},
		{"boot, quiet", 3 * time.Second, true, true},
		{"unknown, quiet", 3 * time.Second, false, true},
		{"a third", simPeriod / 3, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			boot := simBase.Add(-17 * time.Minute)
			s := &phaseSim{}
			if !c.quiet {
				s.addPasses(boot.Add(time.Second), simBase.Add(-simPeriod), simBase.Add(12*simPeriod))
			}
			d := &phaseDriver{t: t, p: &PhaseTracker{Period: simPeriod, Confirm: 1}, s: s, dur: 50 * time.Millisecond, interval: c.interval, rnd: rand.New(rand.NewSource(1))}
			if c.seed {
				d.p.SeedBoot(boot)
			}
			d.read(simBase)
			var starts []time.Time
			for d.start.Before(simBase.Add(10 * simPeriod)) {
				starts = append(starts, d.start)
				last := d.start
				d.step()
				if gap := d.start.Sub(last); 3*c.interval < simPeriod && gap > c.interval {
					t.Fatalf("at %v: %v to the next read, interval %v (pinned %v)", last.Sub(simBase), gap, c.interval, d.p.Pinned())
				}
			}
			if 3*c.interval < simPeriod {
				return
			}
			for i := 3; i < len(starts); i++ {
				if starts[i].Sub(starts[i-3]) < simPeriod {
					t.Fatalf("four reads within a period at %v", starts[i-3].Sub(simBase))
				}
			}
		})
	}
}

// TestPhaseReadsWhileInferring: at most three reads a period until the
// phase is pinned, at a 1- and a 5-minute period, with a fast
// and a 2-second sshare. With slurmctld's boot known (SeedBoot) the phase
// is pinned and confirmed within two periods; without (slurmrestd, or
// scontrol failing) each pass narrows the window to a third.
func TestPhaseReadsWhileInferring(t *testing.T) {
	for _, boot := range []bool{true, false} {
		for _, period := range []time.Duration{time.Minute, 5 * time.Minute} {
			for _, dur := range []time.Duration{50 * time.Millisecond, 2 * time.Second} {
				name := fmt.Sprintf("boot %v, period %v, reads of %v", boot, period, dur)
				b := simBase.Add(-3*time.Hour - 7*time.Second)
				phase := b.Add(1300 * time.Millisecond)
				p := &PhaseTracker{Period: period, Confirm: 1}
				within := 2.0
				if boot {
					p.SeedBoot(b)
				} else {
					within = 10
				}
				usage := func(t time.Time) uint64 { return uint64(phaseFloor(t.Sub(phase), period)) }
				start, end := simBase, simBase.Add(dur)
				var reads []time.Time
				for {
					p.Observe(start, end, usage(start.Add(dur/2)))
					reads = append(reads, start)
					if _, _, ok := p.Pass(end); ok && p.Pinned() {
						break
					}
					if end.Sub(simBase) > time.Duration(within*float64(period)) {
						t.Fatalf("%s: not pinned within %.0f periods", name, within)
					}
					start = p.Next(start, end, period)
					end = start.Add(dur)
				}
				if pass, u, _ := p.Pass(end); (pass.Sub(phase) - phaseRound(pass.Sub(phase), period)*period).Abs() > u {
					t.Errorf("%s: pass %v ± %v misses the phase", name, pass, u)
				}
				for i := range reads {
					j := i
					for j < len(reads) && reads[j].Sub(reads[i]) < period {
						j++
					}
					if j-i > 3 {
						t.Errorf("%s: %d reads in the period from %v", name, j-i, reads[i].Sub(simBase))
					}
				}
				t.Logf("%s: pinned after %.1f periods, %d reads", name, float64(end.Sub(simBase))/float64(period), len(reads))
			}
		}
	}
}

// TestPhaseQuiet: on a cluster whose passes change nothing the reads can
// see (no usage yet), nothing can be inferred: after two periods of
// reads that saw no change, serve reads once a period, and the boot's
// window, which no pass contradicted, stays.
func TestPhaseQuiet(t *testing.T) {
	for _, boot := range []bool{true, false} {
		p := &PhaseTracker{Period: simPeriod, Confirm: 1}
		if boot {
			p.SeedBoot(simBase.Add(-time.Hour - 13*time.Second))
		}
		start, dur := simBase, 50*time.Millisecond
		var reads []time.Time
		for start.Sub(simBase) < 12*simPeriod {
			p.Observe(start, start.Add(dur), 7)
			reads = append(reads, start)
			start = p.Next(start, start.Add(dur), simPeriod)
		}
		late := 0
		for _, r := range reads {
			if r.Sub(simBase) >= 3*simPeriod {
				late++
			}
		}
		if late > 9+1 {
			t.Errorf("boot %v: %d reads in the 9 quiet periods after the first three, want one a period", boot, late)
		}
		if boot && (!p.valid || !p.Pinned()) {
			t.Errorf("the boot's window dropped without a pass seen against it")
		}
		if _, _, ok := p.Pass(start); ok {
			t.Errorf("boot %v: a phase known with no pass ever seen", boot)
		}
		t.Logf("boot %v: %d reads in 12 periods, %d in the last 9", boot, len(reads), late)
	}
}

// TestPhaseSeedIsABelief: a phase kept from an earlier run (Seed) is a
// belief. Until a bracket confirms it the tracker says what its reads
// alone say, read for read, as a twin without it does; a wrong one (the
// saved pass 30 s off, as an edited file had it) is never the phase
// judged with, and the first bracket that contradicts it drops it, saying
// what contradicted it; a right one is adopted at the first bracket.
func TestPhaseSeedIsABelief(t *testing.T) {
	boot := simBase.Add(-17 * time.Minute)
	phase := boot.Add(time.Second)
	const u = 1590 * time.Millisecond
	for _, c := range []struct {
		name  string
		off   time.Duration // of the belief from the passes
		right bool
		boot  bool // the tracker also knows slurmctld's boot
	}{
		{"right, boot known", 0, true, true},
		{"30 s late, boot known", 30 * time.Second, false, true},
		{"30 s late, boot unknown", 30 * time.Second, false, false},
		{"5 s early, boot known", -5 * time.Second, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &phaseSim{}
			s.addPasses(phase, simBase.Add(-simPeriod), simBase.Add(30*simPeriod))
			d := &phaseDriver{t: t, p: &PhaseTracker{Period: simPeriod, Confirm: 1}, s: s, dur: 50 * time.Millisecond, interval: simPeriod, rnd: rand.New(rand.NewSource(1))}
			twin := &PhaseTracker{Period: simPeriod, Confirm: 1}
			if c.boot {
				d.p.SeedBoot(boot)
				twin.SeedBoot(boot)
			}
			d.p.Seed(phase.Add(c.off+11*simPeriod), u)
			judged := false // a bracket confirmed or dropped the belief
			var dropped string
			for d.start.Sub(simBase) < 6*simPeriod {
				if d.reads == 0 {
					d.read(simBase)
				} else {
					d.step()
				}
				twin.Observe(d.start, d.end, d.s.usage(d.end))
				dropped += d.p.Dropped()
				pass, pu, ok := d.p.Pass(d.end)
				if judged = judged || !d.p.believed; !judged {
					if tp, tu, tok := twin.Pass(d.end); tok != ok || !tp.Equal(pass) || tu != pu {
						t.Fatalf("at %v, the belief unjudged: Pass %v ±%v %v, without it %v ±%v %v", d.end.Sub(simBase), pass, pu, ok, tp, tu, tok)
					}
				}
				if ok && !d.holds(phase) {
					t.Fatalf("at %v: phase known as %v ±%v, missing the passes", d.end.Sub(simBase), pass.Sub(phase)%simPeriod, pu)
				}
			}
			if !judged {
				t.Fatal("no bracket judged the belief in 6 periods")
			}
			if _, _, ok := d.p.Pass(d.end); !ok {
				t.Error("phase not known after 6 periods")
			}
			if c.right != (dropped == "") {
				t.Errorf("dropped %q; want it dropped: %v", dropped, !c.right)
			}
			if !c.right && !strings.Contains(dropped, "a pass between reads at") {
				t.Errorf("dropped %q: want the bracket that contradicted it named", dropped)
			}
		})
	}
}
