package engine

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/passes"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// ReportFunc reads what Slurm reports (sshare, slurmrestd).
type ReportFunc func(ctx context.Context) (*shares.Table, error)

// Tracker reads what slurmctld reports and follows its decay passes: the
// one place serve's loop and check read Slurm across a pass. From
// successive reads it infers the passes' phase when the state file is
// unreadable, says whether slurmctld is settling after a start, and keeps
// each read's references: the read before the last pass (classic's
// one-pass lag) and the first read after it.
type Tracker struct {
	c TrackerConfig
	// clock gives the reads' moments: the wall clock, or the Engine's
	// it is given to (WithTracker, WithClock)
	clock Clock

	mu sync.Mutex
	t  *passes.PhaseTracker
	// period is PriorityCalcPeriod and decay the decay factor per
	// second, which the refresh loop sets (SetConf) as it rereads
	// slurm.conf
	period time.Duration
	decay  float64
	// chargeAtEnd: AccountingStorageEnforce=limits, under which a job's
	// end raises RawUsage between passes (passes.Between)
	chargeAtEnd bool
	boot        time.Time // slurmctld's, as last asked
	// askBoot: ask slurmctld's boot at the next read (the first, one
	// after a failed read, or one after a read that put the phase in
	// doubt); otherwise a read carries the boot last asked
	askBoot bool
	// proc is the slurmctld process last seen (TrackerConfig.Process)
	proc slurmstate.Process
	// passes counts the passes seen between reads (passes.Between):
	// what the phase tracker is given, so that a job's end charged
	// between passes is not taken for one
	passes uint64
	// settling: slurmctld started since the last pass seen between two
	// reads of it (drift.Input.Settling)
	settling bool
	// prev is the last good read, for the references of the next
	prev *Reading
	// recalled is a phase kept from before (Recall), until a read shows
	// whether its boot is still running
	recalled *PassMemory
}

// PassMemory is the phase of one boot's passes as reads pinned it: the
// passes of a boot keep one schedule (passJitter), so it holds for the
// whole boot, and serve keeps it across its own restarts
// (--storage.path), which would otherwise infer it afresh over several
// periods of reads.
type PassMemory struct {
	Boot        time.Time     `json:"boot"`
	Pass        time.Time     `json:"pass"`
	Uncertainty time.Duration `json:"uncertainty"`
	Period      time.Duration `json:"period"`
}

// Memory is the phase the reads pinned, for the boot they saw (ok false:
// not pinned, or the boot unknown).
func (t *Tracker) Memory() (m PassMemory, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.t == nil || t.boot.IsZero() || !t.t.Pinned() || t.prev == nil {
		return m, false
	}
	pass, u, ok := t.t.Pass(t.prev.End)
	// the boot's first pass of the schedule: the same from period to
	// period, so that it is saved when it changes, not at every pass
	pass = pass.Add(-pass.Sub(t.boot) / t.period * t.period)
	return PassMemory{Boot: t.boot, Pass: pass, Uncertainty: u, Period: t.period}, ok
}

// Recall gives the tracker a phase kept from before: a belief the reads
// confirm or drop (passes.PhaseTracker.Seed), if the first read shows the
// same boot and period.
func (t *Tracker) Recall(m PassMemory) {
	t.mu.Lock()
	t.recalled = &m
	t.mu.Unlock()
}

// Dropped says what contradicted the recalled phase, once, when a read
// dropped it ("" otherwise).
func (t *Tracker) Dropped() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.t == nil {
		return ""
	}
	return t.t.Dropped()
}

// TrackerConfig says how to read the reports.
type TrackerConfig struct {
	Read ReportFunc
	// BootTime, if set, asks slurmctld when it started: a restart starts
	// its passes at a new phase. It is asked at the first read, and again
	// only when a restart may have happened: the slurmctld process
	// changed (Process), or a read failed, showed usage lost, a pass
	// where none was expected or none where one was. Not at every read
	// (scontrol show config is two RPCs), unless Process is
	// nil or fails (slurmctld on another host).
	BootTime func(ctx context.Context) (time.Time, error)
	// Process is the slurmctld running on this host
	// (slurmstate.Ctld): a restart, even one that keeps every value,
	// changes it.
	Process func() (slurmstate.Process, error)
	// Timeout bounds one read (BootTime and Read together).
	Timeout time.Duration
	// Interval is how often serve reads when nothing tells when a pass
	// falls.
	Interval time.Duration
	// StateDir is slurmctld's StateSaveLocation: priority_last_decay_ran,
	// when readable, tells when the next pass falls.
	StateDir string
	// Period is PriorityCalcPeriod.
	Period time.Duration
	// Confirm is passes.PhaseTracker.Confirm: 1 for serve, which reads for
	// hours; 0 for check, which brackets one pass a second apart and
	// exits.
	Confirm int
}

// NewTracker is a tracker that has read nothing yet.
func NewTracker(c TrackerConfig) *Tracker {
	return &Tracker{c: c, period: c.Period, clock: Clock{}.orWall(), askBoot: true}
}

// Reading is one read of the reported side, with its references.
type Reading struct {
	Out *shares.Table
	Raw map[result.AssocKey]float64 // Out's RawUsage
	// At is the middle of the read, from Start to End; Took includes
	// asking for the boot time.
	At, Start, End time.Time
	Took           time.Duration
	// Boot is slurmctld's boot as last asked (zero: unknown; BootErr says
	// why when it was asked at this read)
	Boot    time.Time
	BootErr error
	// ID names the reading to whoever made it (check: a snapshot's index).
	ID int
	// Pass: slurmctld ran a decay pass since the read before.
	Pass, Settling bool
	// Prev is the last earlier read whose usage differs, taken before
	// slurmctld's last decay pass (nil: none); PassRead the first read
	// after the last pass seen, and PassGap how long after the read before
	// it it ended.
	Prev, PassRead *Ref
	PassGap        time.Duration
	// Losses are, on the read ReadAcrossPass returns, the usage losses
	// its reads showed one against the next (nil: it read once).
	Losses []result.UsageLoss
	Err    error
}

// Ref is what a later report needs of an earlier one: a reference holds
// no references of its own, so that a long series keeps two reads alive,
// not its history.
type Ref struct {
	ID  int
	At  time.Time // zero: unknown
	Raw map[result.AssocKey]float64
}

func (r *Reading) ref() *Ref { return &Ref{ID: r.ID, At: r.At, Raw: r.Raw} }

// LagReference is the read a report's classic values lag behind: Prev, if
// at most 3 periods before it (a zero period or moment: whatever the
// times). serve's reports and check's replay of a series of saved ones
// take it alike.
func (r *Reading) LagReference(period time.Duration) *Ref {
	p := r.Prev
	if p == nil || (period > 0 && !p.At.IsZero() && !r.At.IsZero() && r.At.Sub(p.At) > 3*period) {
		return nil
	}
	return p
}

// PassRaw is the usage of the first read after slurmctld's last pass
// (drift.Input.PassRaw), where it differs from this read's and came at
// most a period before it (0: any time before; nil: none).
func (r *Reading) PassRaw(period time.Duration) map[result.AssocKey]float64 {
	p := r.PassRead
	if p == nil || maps.Equal(p.Raw, r.Raw) || (period > 0 && r.At.Sub(p.At) > period) {
		return nil
	}
	return p.Raw
}

// Follow makes r the read after prev (nil: r is the first), setting the
// references r is judged with. Reads are followed in time order.
func (r *Reading) Follow(prev *Reading) {
	if prev == nil {
		return
	}
	r.Prev, r.PassRead, r.PassGap = prev.Prev, prev.PassRead, prev.PassGap
	if !maps.Equal(prev.Raw, r.Raw) {
		r.Prev = prev.ref()
	}
	if r.Pass {
		r.PassRead, r.PassGap = r.ref(), r.End.Sub(prev.Start)
	}
}

// SetConf follows slurm.conf's PriorityCalcPeriod and decay.
func (t *Tracker) SetConf(conf *slurmconf.Config) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.period = conf.PriorityCalcPeriod
	t.decay = conf.Passes().D()
	t.chargeAtEnd = conf.EnforceLimits()
	t.mu.Unlock()
}

// Read reads the reported side once, bounded by the timeout, and follows
// it.
func (t *Tracker) Read(ctx context.Context) *Reading {
	r := &Reading{}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, t.c.Timeout)
	defer cancel()
	t0 := t.clock.Now()
	r.Out, r.Err = t.c.Read(rctx)
	t1 := t.clock.Now()
	r.At, r.Start, r.End = t0.Add(t1.Sub(t0)/2), t0, t1
	if r.Err == nil {
		r.Raw = drift.RawByKey(r.Out)
	}
	t.mu.Lock()
	ask := t.c.BootTime != nil && r.Err == nil && (t.restarted() || t.askBoot || t.lost(r))
	t.askBoot = t.askBoot || r.Err != nil
	r.Boot = t.boot
	t.mu.Unlock()
	if ask {
		r.Boot, r.BootErr = t.c.BootTime(rctx)
	}
	r.Took = time.Since(start)
	if r.Err != nil {
		return r
	}
	t.observe(r, ask)
	return r
}

// restarted: slurmctld's process is not the one last seen, or cannot be
// told (then every read asks its boot).
func (t *Tracker) restarted() bool {
	if t.c.Process == nil {
		return true
	}
	p, err := t.c.Process()
	moved := err != nil || p != t.proc
	t.proc = p
	return moved
}

// lost: r shows usage lost since the last read, which a restart from an
// older checkpoint does.
func (t *Tracker) lost(r *Reading) bool {
	return t.prev != nil && t.decay > 0 && len(UsageLosses(t.prev, r, t.decay, t.period, false)) > 0
}

// observe records a good read, slurmctld having booted at r.Boot (zero:
// unknown): whether a pass fell since the read before
// (passes.Between), whether slurmctld is settling
// (drift.Input.Settling), the phase, and r's references. A new
// PriorityCalcPeriod or a restart of slurmctld, which starts its passes
// at a new phase, starts the inference afresh.
func (t *Tracker) observe(r *Reading, asked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if asked {
		t.askBoot = r.BootErr != nil || r.Boot.IsZero()
	}
	first := t.prev == nil
	r.Pass = !first && passes.Between(t.prev.Out, r.Out, t.chargeAtEnd)
	if r.Pass {
		t.passes++
	}
	restarted := !r.Boot.IsZero() && !t.boot.IsZero() && !r.Boot.Equal(t.boot)
	switch {
	case restarted:
		t.settling = true
	case first:
		// the exporter may start with slurmctld: two periods cover its
		// first pass and the one after
		t.settling = !r.Boot.IsZero() && r.Start.Sub(r.Boot) < 2*t.period
	case r.Pass:
		t.settling = false
	}
	r.Settling = t.settling
	if !r.Boot.IsZero() {
		t.boot = r.Boot
	}
	if p := t.period; p > 0 && (t.t == nil || t.t.Period != p || restarted) {
		t.t = &passes.PhaseTracker{Period: p, Confirm: t.c.Confirm}
		if !r.Boot.IsZero() {
			t.t.SeedBoot(r.Boot)
		}
	}
	if m := t.recalled; m != nil && !r.Boot.IsZero() && t.t != nil {
		if m.Boot.Equal(r.Boot) && m.Period == t.period {
			t.t.Seed(m.Pass, m.Uncertainty)
		}
		t.recalled = nil
	}
	if t.t != nil {
		t.t.Observe(r.Start, r.End, t.passes)
		// a restart moves the phase: ask at the next read (a doubted
		// phase is read again within the period)
		t.askBoot = t.askBoot || t.t.Doubted()
	}
	r.Follow(t.prev)
	t.prev = r
}

// pass is slurmctld's last decay pass at or before at as the reads
// inferred it, for the local cluster (ok false: not pinned).
func (t *Tracker) pass(local bool, at time.Time) (pass time.Time, uncertainty time.Duration, ok bool) {
	if t == nil || !local {
		return pass, 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.t == nil || t.t.Period != t.period {
		return pass, 0, false
	}
	return t.t.Pass(at)
}

// Next is when to read next after r: just after the state file's next
// pass when it is readable, so that no read straddles a pass; otherwise
// as the phase tracker schedules reads to pin the phase and then to read
// just after each pass.
func (t *Tracker) Next(r *Reading) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	regular := r.Start.Add(t.c.Interval)
	if t.t == nil {
		return regular
	}
	if t.c.StateDir != "" {
		if ran, _, err := slurmstate.LastDecayRan(t.c.StateDir); err == nil {
			p := fairshare.Passes{Period: t.t.Period.Seconds(), Phase: float64(ran.Unix())}
			next := time.Unix(int64(p.LastPass(float64(r.End.Unix()))+p.Period), 0)
			// whole seconds, and the pass itself takes a moment
			next = next.Add(time.Second + r.End.Sub(r.Start))
			if next.Before(regular) {
				return next
			}
			return regular
		}
	}
	return t.t.Next(r.Start, r.End, t.c.Interval)
}

// checkReads bounds ReadAcrossPass's reads, which also come at most three
// a minute: a cron job's check must not poll slurmctld.
const checkReads = 15

// ReadAcrossPass reads until two reads bracket a decay pass (wait at
// most; 0: once): check's way to judge usage against a few seconds of
// charge instead of a whole period when the state file is unreadable.
// The last read is returned, after the pass when one was bracketed; its
// PassRead is that read, or the first read when a pass fell while every
// association with usage ran a job (none decreased: its values lie
// between the first read's and the last's).
func (t *Tracker) ReadAcrossPass(ctx context.Context, wait time.Duration) (*Reading, error) {
	deadline := t.clock.Now().Add(wait)
	var first, r *Reading
	var starts []time.Time
	var losses []result.UsageLoss
	for {
		prev := r
		if r = t.Read(ctx); r.Err != nil {
			return nil, r.Err
		}
		if first == nil {
			first = r
		} else {
			// a few minutes: a periodic usage reset is unlikely, and
			// would be one
			losses = append(losses, UsageLosses(prev, r, t.decay, t.period, false)...)
			r.Losses = append([]result.UsageLoss{}, losses...)
		}
		starts = append(starts, r.Start)
		// the read that closed a bracket of the pass is after it: the
		// report. With the boot known the reads bracket the pass its
		// schedule predicts, three reads in all; without, the tracker
		// reads at most three times a period and the bracket is as wide
		// as they leave it, which the bound allows for.
		if _, u, ok := t.pass(true, r.End); ok && u < t.period/4 && r.Pass {
			break
		}
		next := t.Next(r)
		if n := len(starts); n >= 3 {
			if m := starts[n-3].Add(time.Minute); m.After(next) {
				next = m
			}
		}
		if len(starts) >= checkReads || next.After(deadline) {
			break
		}
		select {
		case <-time.After(t.clock.Until(next)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if wait > 0 && r.PassRead == nil && first != r {
		r.PassRead = first.ref()
	}
	return r, nil
}
