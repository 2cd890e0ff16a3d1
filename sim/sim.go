// Package sim is a Slurm cluster simulated in memory, for serve --demo: an
// account tree whose users submit jobs that wait, run and end; slurmdbd's
// tables as slurmdbd writes them (the job records, the hourly rollups); and
// slurmctld's decayed usage, charged pass by pass as priority_multifactor.c
// does, which it reports as sshare prints it. Faults of the kinds the
// exporter exists to catch come and go on a schedule.
//
// The exporter reads it through the same engine as a real cluster (it is
// an engine.Source); nothing here computes what the exporter computes
// from it: slurmctld's side is stepped event by event, independently of
// the rebuild from the tables.
package sim

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// Name is the simulated cluster's name.
const Name = "demo"

// SlurmConf is the simulated cluster's slurm.conf: the settings slurmctld
// runs with (until a fault changes its PriorityFlags) and the exporter
// reads.
const SlurmConf = `ClusterName=demo
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=5
PriorityMaxAge=7-0
AccountingStorageEnforce=associations,limits
PriorityWeightFairshare=100000
PriorityWeightAge=1000
PriorityWeightJobSize=1000
PriorityWeightPartition=5000
PriorityWeightQOS=10000
NodeName=n[1-64] CPUs=64
PartitionName=batch Nodes=ALL Default=YES PriorityJobFactor=10 MaxTime=2-0
PartitionName=long Nodes=ALL PriorityJobFactor=2 MaxTime=7-0
`

// History is how long the demo's slurmctld has run when the demo starts:
// two of its half-lives (PriorityDecayHalfLife=7-0, Slurm's default; at a
// 1-day half-life, rolled-up hours spread evenly over their passes are
// 0.51% off slurmctld's charge, beyond --drift.usage-tolerance on a
// healthy demo: the approximation fairshare.Passes.BucketUsage names).
const History = 14 * 24 * time.Hour

// Config says what to simulate.
type Config struct {
	Associations int
	// Speed is how many simulated seconds pass per wall second.
	Speed float64
	// FaultInterval starts a fault this often (wall time; 0: none), the
	// kinds in turn (Faults), each lasting FaultDuration.
	FaultInterval, FaultDuration time.Duration
	// History is how long the cluster ran before the simulation starts
	// (simulated time): slurmctld started then.
	History time.Duration
	Seed    uint64
	Log     zerolog.Logger
	// Start is the wall clock's moment the simulated clock starts at
	// (zero: now).
	Start time.Time
	// At is the simulated clock's moment at Start (zero: Start): a test
	// that must not depend on the hour it runs at sets it.
	At time.Time
}

// The kinds of faults, in the order they are injected.
const (
	// FaultLostUsage: slurmctld loses the usage of its busiest user (as
	// after sacctmgr modify user set RawUsage=0, or lost state).
	FaultLostUsage = "lost_usage"
	// FaultPriorityFlags: a reconfigure makes slurmctld compute classic
	// fairshare (PriorityFlags=NO_FAIR_TREE) while slurm.conf, which the
	// exporter reads, still says Fair Tree.
	FaultPriorityFlags = "priority_flags"
	// FaultStalledRollup: slurmdbd stops rolling usage up (until it
	// catches up, as after an outage).
	FaultStalledRollup = "stalled_rollup"
)

// Faults are the kinds of faults, in the order they are injected.
var Faults = []string{FaultLostUsage, FaultPriorityFlags, FaultStalledRollup}

// Cluster is the simulation. Its methods advance it to the simulated
// clock's moment first; all are safe for concurrent use.
type Cluster struct {
	mu   sync.Mutex
	c    Config
	conf *slurmconf.Config
	wall time.Time // when the simulated clock started
	sim  int64     // the simulated moment then (unix seconds)
	t    int64     // simulated up to
	rng  *rand.Rand

	tables slurmdbd.Tables
	tree   *fairshare.Tree // the structure: index i is Assocs[i], id_assoc i+1
	users  []*user
	queue  byNext // the users, soonest transition first

	// slurmctld: usage_raw of each user association, its last decay
	// pass and boot, and the faults in effect
	usage    []float64
	atPass   []float64 // usage as the last pass left it
	d        float64   // decay per second, as slurmctld computes it
	period   int64
	lastPass int64
	boot     int64
	faults   map[string]bool
	lost     int     // the user whose usage was lost (-1: none)
	lostAmt  float64 // its usage then, decayed since
	jobs     uint32
}

// user is one user association and its job: idle until next, then
// pending until start, running until end.
type user struct {
	i               int
	uid             uint32
	busy            float64 // the share of time it keeps a job running
	job             int     // its job's index in tables.Jobs (-1: idle)
	next            int64   // the next transition
	submit, start   int64
	run, end        int64
	cpus            uint32
	limit           int64 // seconds
	part            string
	qos             uint32
	pending, active bool
}

// New starts the simulation: the cluster has run for c.History when it
// starts.
func New(c Config) (*Cluster, error) {
	conf, err := slurmconf.Load(fstest.MapFS{"slurm.conf": {Data: []byte(SlurmConf)}}, "slurm.conf")
	if err != nil {
		return nil, fmt.Errorf("the demo's slurm.conf: %w", err)
	}
	if c.Speed <= 0 {
		return nil, fmt.Errorf("speed %v: expected > 0", c.Speed)
	}
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	if c.At.IsZero() {
		c.At = c.Start
	}
	s := &Cluster{c: c, conf: conf, wall: c.Start, sim: c.At.Unix(), rng: rand.New(rand.NewPCG(c.Seed, 0xde30)),
		faults: map[string]bool{}, lost: -1, period: int64(conf.PriorityCalcPeriod.Seconds())}
	s.d = 1 - 0.693/conf.PriorityDecayHalfLife.Seconds()
	s.boot = s.sim - int64(c.History.Seconds())
	s.boot -= s.boot % 60
	s.t, s.lastPass = s.boot, s.boot
	s.build()
	s.advance(s.sim)
	return s, nil
}

// Conf is the cluster's slurm.conf, as the exporter reads it.
func (s *Cluster) Conf() *slurmconf.Config { return s.conf }

// Now is the simulated clock.
func (s *Cluster) Now() time.Time {
	return time.Unix(s.sim, 0).Add(time.Duration(float64(time.Since(s.wall)) * s.c.Speed))
}

// build makes the tree (fairshare.Synthetic's shape), the association
// rows and the users, each with its own appetite.
func (s *Cluster) build() {
	s.tree = fairshare.Synthetic(s.c.Associations, 4, 7)
	n := s.tree.Len()
	s.usage, s.atPass = make([]float64, n), make([]float64, n)
	s.tables = slurmdbd.Tables{Cluster: Name, LastRan: slurmdbd.LastRan{OK: true},
		QOS:       map[uint32]slurmdbd.QOS{1: {ID: 1, Name: "normal", UsageFactor: 1, Priority: 10}, 2: {ID: 2, Name: "high", UsageFactor: 1, Priority: 100}},
		TRESNames: map[uint32]string{1: "cpu", 2: "mem", 3: "energy", 4: "node", 5: "billing"}}
	h := s.boot - s.boot%3600
	s.tables.LastRan.Hourly, s.tables.LastRan.Daily, s.tables.LastRan.Monthly = h, h, h
	for i := range n {
		a := s.tree.Association(i)
		row := slurmdbd.Assoc{ID: uint32(i + 1), User: a.User, Account: a.Account, Shares: a.Shares, Created: s.boot - 86400}
		if !a.IsUser() && a.Parent >= 0 {
			row.ParentAccount = s.tree.Association(a.Parent).Account
		}
		s.tables.Assocs = append(s.tables.Assocs, row)
		if a.IsUser() {
			// a few heavy users, many light ones
			u := &user{i: i, uid: uint32(1000 + i), busy: 0.05 + 0.9*math.Pow(s.rng.Float64(), 3), job: -1}
			u.next = s.boot + s.rng.Int64N(4*3600)
			s.users = append(s.users, u)
		}
	}
	s.queue = slices.Clone(s.users)
	heap.Init(&s.queue)
}

// byNext is a heap of users by their next transition.
type byNext []*user

func (h byNext) Len() int           { return len(h) }
func (h byNext) Less(i, j int) bool { return h[i].next < h[j].next }
func (h byNext) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byNext) Push(x any)        { *h = append(*h, x.(*user)) }
func (h *byNext) Pop() any {
	old := *h
	u := old[len(old)-1]
	*h = old[:len(old)-1]
	return u
}

// advance simulates up to to: every job transition, decay pass and
// hourly rollup in time order, and the faults' schedule.
func (s *Cluster) advance(to int64) {
	for s.t < to {
		next := min(to, s.lastPass+s.period, s.nextFault())
		if !s.faults[FaultStalledRollup] {
			next = min(next, s.tables.LastRan.Hourly+3600)
		}
		if len(s.queue) > 0 {
			next = min(next, s.queue[0].next)
		}
		next = max(next, s.t)
		s.setFaults(next)
		for len(s.queue) > 0 && s.queue[0].next <= next {
			u := s.queue[0]
			s.step(u, next)
			heap.Fix(&s.queue, 0)
		}
		if next >= s.lastPass+s.period {
			s.pass(next)
		}
		if h := next - next%3600; h > s.tables.LastRan.Hourly && !s.faults[FaultStalledRollup] {
			s.rollup(h)
		}
		s.t = next
		if next == to {
			return
		}
	}
}

// step moves a user's job on at t: submit, start, end.
func (s *Cluster) step(u *user, t int64) {
	switch {
	case !u.pending && !u.active: // submit
		u.submit, u.cpus = t, 1<<s.rng.IntN(7)
		u.part, u.qos = "batch", uint32(1)
		if s.rng.IntN(4) == 0 {
			u.part = "long"
		}
		if s.rng.IntN(5) == 0 {
			u.qos = 2
		}
		run := int64(600 + s.rng.ExpFloat64()*3*3600)
		u.limit = min(2*86400, run*2)
		u.run = run
		u.start = t + int64(s.rng.ExpFloat64()*900)
		u.pending, u.next = true, u.start
		s.jobs++
	case u.pending: // start
		u.pending, u.active = false, true
		u.end = t + u.run
		u.next = u.end
		u.job = len(s.tables.Jobs)
		s.tables.Jobs = append(s.tables.Jobs, usage.Job{Inx: uint64(s.jobs), ID: uint32(s.jobs), Partition: u.part, Assoc: uint32(u.i + 1), QOS: u.qos, Start: t,
			TRESAlloc: fmt.Sprintf("1=%d,4=1,5=%d", u.cpus, u.cpus)})
	default: // end: AccountingStorageEnforce=limits charges the job's last interval now
		j := &s.tables.Jobs[u.job]
		j.End = t
		s.charge(u.i, float64(u.cpus), t-max(s.lastPass, j.Start))
		u.active, u.job = false, -1
		// idle for a while: the busier the user, the shorter
		idle := float64(t-j.Start) * (1 - u.busy) / u.busy
		u.next = t + 1 + int64(idle*s.rng.ExpFloat64())
	}
}

// charge adds what slurmctld charges a job for delta seconds of billing
// (_apply_new_usage: delta·d^delta·billing, as if at the interval's
// start).
func (s *Cluster) charge(i int, billing float64, delta int64) {
	if delta > 0 {
		s.usage[i] += float64(delta) * math.Pow(s.d, float64(delta)) * billing
	}
}

// pass is slurmctld's decay pass at t: every usage decays by d^(t-last),
// then each running job is charged since the last pass.
func (s *Cluster) pass(t int64) {
	k := math.Pow(s.d, float64(t-s.lastPass))
	for i := range s.usage {
		s.usage[i] *= k
	}
	s.lostAmt *= k
	for _, u := range s.users {
		if u.active {
			s.charge(u.i, float64(u.cpus), t-max(s.lastPass, s.tables.Jobs[u.job].Start))
		}
	}
	s.lastPass = t
	s.atPass = append(s.atPass[:0], s.usage...)
}

// rollup is slurmdbd's hourly rollup up to the hour starting at to: each
// hour since the last, the billing seconds of every job in it.
func (s *Cluster) rollup(to int64) {
	for h := s.tables.LastRan.Hourly; h < to; h += 3600 {
		sums := map[uint32]float64{}
		for _, j := range s.tables.Jobs {
			end := j.End
			if end == 0 {
				end = h + 3600
			}
			if lo, hi := max(j.Start, h), min(end, h+3600); hi > lo {
				billing, _ := usage.JobBilling(j, nil)
				sums[j.Assoc] += billing * float64(hi-lo)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(sums)) {
			s.tables.Hours = append(s.tables.Hours, usage.Row{Assoc: id, TRES: 5, Start: h, AllocSecs: sums[id]})
		}
	}
	s.tables.LastRan.Hourly, s.tables.LastRan.Daily, s.tables.LastRan.Monthly = to, to, to
}

// setFaults starts and ends faults at simulated moment t, by the wall
// clock's schedule: fault m, of kind Faults[m%3], runs from (m+1)·interval
// for duration (the cluster is healthy for the first interval).
func (s *Cluster) setFaults(t int64) {
	on := map[string]bool{}
	if iv := s.c.FaultInterval; iv > 0 && t >= s.sim {
		wall := time.Duration(float64(time.Duration(t-s.sim)*time.Second) / s.c.Speed)
		for m := int64(wall/iv) - 1; m >= 0 && wall < time.Duration(m+1)*iv+s.c.FaultDuration; m-- {
			on[Faults[m%int64(len(Faults))]] = true
		}
	}
	for _, f := range Faults {
		if on[f] != s.faults[f] {
			s.fault(f, on[f], t)
		}
	}
}

// nextFault is the simulated moment of the next start or end of a fault
// after s.t (math.MaxInt64: none).
func (s *Cluster) nextFault() int64 {
	iv, dur := s.c.FaultInterval, s.c.FaultDuration
	if iv <= 0 {
		return math.MaxInt64
	}
	wall := time.Duration(float64(time.Duration(max(0, s.t-s.sim))*time.Second) / s.c.Speed)
	next := (wall/iv + 1) * iv
	for m := max(0, (wall-dur)/iv); m <= wall/iv; m++ {
		if e := m*iv + dur; m > 0 && e > wall {
			next = min(next, e)
		}
	}
	return s.sim + int64(math.Ceil(next.Seconds()*s.c.Speed))
}

// fault starts or ends one fault at t.
func (s *Cluster) fault(f string, on bool, t int64) {
	s.faults[f] = on
	ev := s.c.Log.Info().Str("fault", f).Time("simulated", time.Unix(t, 0))
	if f == FaultLostUsage {
		if on {
			s.lost = slices.MaxFunc(s.users, func(a, b *user) int { return cmp.Compare(s.usage[a.i], s.usage[b.i]) }).i
			s.lostAmt, s.usage[s.lost] = s.usage[s.lost], 0
			a := s.tree.Association(s.lost)
			ev = ev.Str("account", a.Account).Str("user", a.User).Float64("raw_usage", s.lostAmt)
		} else if s.lost >= 0 {
			s.usage[s.lost] += s.lostAmt
			s.lost, s.lostAmt = -1, 0
		}
	}
	if on {
		ev.Msg("demo: fault injected")
	} else {
		ev.Msg("demo: fault over")
	}
}

// at advances the simulation to the simulated clock's moment and
// returns it.
func (s *Cluster) at() int64 {
	t := s.Now().Unix()
	if t > s.t {
		s.advance(t)
	}
	return s.t
}

// Boot is when slurmctld started (scontrol show config's BOOT_TIME).
func (s *Cluster) Boot(context.Context) (time.Time, error) { return time.Unix(s.boot, 0), nil }

// describe is for errors: the cluster's name and moment.
func (s *Cluster) describe() string {
	return fmt.Sprintf("simulated cluster %s at %s", Name, time.Unix(s.t, 0).UTC().Format(time.RFC3339))
}
