package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/passes"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// Engine computes clusters' fairshare inputs from the slurmdbd database:
// the one pipeline behind serve, check and explain. It keeps each
// cluster's incremental state (frozen usage sums, saved usage, Maui
// windows) from one Refresh to the next, so that serve's Loop refreshes in
// milliseconds what check computes once from nothing.
type Engine struct {
	dsn  string
	conf *slurmconf.Config
	o    options
	now  func() time.Time // for durations: wall time
	src  Source
	// boot is slurmctld's, as last learned (zero: unknown)
	boot     time.Time
	clusters map[string]*clusterState
	stages   map[string]result.Stage
	// warned: each cluster's data problems at its last refresh
	warned map[string]map[string]bool
}

type options struct {
	log          zerolog.Logger
	queryTimeout time.Duration
	names        []string
	loadConf     func() (*slurmconf.Config, error)
	stateDir     string
	tolerance    drift.Tolerance
	named        int
	maui         fairshare.MauiConfig
	mauiInterval time.Duration
	whatIf       bool
	allTRES      bool
	storagePath  string
	bootTime     func(context.Context) (time.Time, error)
	tracker      *Tracker
	source       Source
	clock        Clock
	wall         func() time.Time
}

// Option configures an Engine.
type Option func(*options)

// WithLogger logs data problems and source failures to l.
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithQueryTimeout bounds connecting and each query (default
// slurmdbd.DefaultTimeout).
func WithQueryTimeout(d time.Duration) Option { return func(o *options) { o.queryTimeout = d } }

// WithClusters limits Clusters to these (default: every cluster in
// cluster_table).
func WithClusters(names ...string) Option { return func(o *options) { o.names = names } }

// WithReload reads slurm.conf again at every ReloadConf (it changes with
// scontrol reconfigure); a failure keeps the settings last read.
func WithReload(load func() (*slurmconf.Config, error)) Option {
	return func(o *options) { o.loadConf = load }
}

// WithStateDir is slurmctld's StateSaveLocation, whose
// priority_last_decay_ran gives the local cluster's pass phase.
func WithStateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// WithTolerance is the drift allowed beyond what the inputs explain.
func WithTolerance(t drift.Tolerance) Option { return func(o *options) { o.tolerance = t } }

// WithNamed names the n associations drifting the most on usage
// (Inputs.Named).
func WithNamed(n int) Option { return func(o *options) { o.named = n } }

// WithMaui configures the Maui what-if view (interval 0: off).
func WithMaui(c fairshare.MauiConfig, interval time.Duration) Option {
	return func(o *options) { o.maui, o.mauiInterval = c, interval }
}

// WithWhatIf computes the what-if views (ticket-based, Maui), which only
// --collector.extended exports and explain shows.
func WithWhatIf() Option { return func(o *options) { o.whatIf = true } }

// WithAllTRES reads every TRES's usage, which only --collector.extended
// exports (default: billing alone, slurmdbd.Cluster.AllTRES).
func WithAllTRES() Option { return func(o *options) { o.allTRES = true } }

// WithStorage keeps each cluster's frozen usage in dir across restarts.
func WithStorage(dir string) Option { return func(o *options) { o.storagePath = dir } }

// WithBootTime asks slurmctld when it started, at each Refresh of the
// local cluster: its order of tied Fair Tree siblings follows from it. A
// Tracker that reads the reports learns it from its reads instead.
func WithBootTime(f func(context.Context) (time.Time, error)) Option {
	return func(o *options) { o.bootTime = f }
}

// WithTracker gives the engine the reads of what slurmctld reports: the
// pass phase they infer when the state file is unreadable, slurmctld's
// boot, and (for Loop) the reports themselves. Its reads take their
// moments from the engine's clock (WithClock).
func WithTracker(t *Tracker) Option { return func(o *options) { o.tracker = t } }

// New is an engine reading the database at dsn under conf's settings.
func New(conf *slurmconf.Config, dsn string, opts ...Option) *Engine {
	e := &Engine{dsn: dsn, conf: conf, o: options{log: zerolog.Nop()}, now: time.Now,
		clusters: map[string]*clusterState{}, stages: map[string]result.Stage{}, warned: map[string]map[string]bool{}}
	for _, opt := range opts {
		opt(&e.o)
	}
	e.o.clock = e.o.clock.orWall()
	if e.o.wall != nil {
		e.now = e.o.wall
	}
	if e.o.tracker != nil {
		e.o.tracker.clock = e.o.clock // its reads' moments are the engine's
	}
	return e
}

// clusterState is what the engine keeps of a cluster between refreshes.
type clusterState struct {
	// cluster is where the last refresh read the cluster, which the
	// forecast's inputs are read from too
	cluster ClusterSource
	ref     slurmdbd.Refresher
	// atReport rebuilds usage at the moments of the reports, with a
	// Refresher of its own: each moves forward in time.
	atReport slurmdbd.Refresher
	// mauiRollup is the hourly rollup the Maui windows were read at.
	mauiRollup int64
	maui       []float64
	// savedFreezes is ref.Freezes when it was last saved.
	savedFreezes int
	// bootSums are the tail sums and the usage per id_assoc at
	// slurmctld's boot (bootSums), for bootKey.
	bootSums map[uint32][3]float64
	bootKey  bootKey
	// schema is the database schema the last refresh read by (nil: none yet).
	schema *result.Schema
}

type bootKey struct {
	boot   time.Time
	passes fairshare.Passes
	since  time.Time
}

// Close closes the database; a later Refresh opens it again.
func (e *Engine) Close() {
	if e.src != nil && e.o.source == nil {
		e.src.Close()
		e.src = nil
	}
}

// Refresh computes one cluster at at: the database's tree and usage with
// the pending jobs and what-if inputs, from what the engine kept of the
// cluster (nothing, the first time). On failure the kept state is as it
// was.
func (e *Engine) Refresh(ctx context.Context, name string, at time.Time) (*build.Inputs, error) {
	cs := e.clusters[name]
	if cs == nil {
		cs = &clusterState{}
		e.clusters[name] = cs
		e.restore(name, cs)
	}
	if e.o.bootTime != nil && name == e.conf.ClusterName {
		boot, err := e.o.bootTime(ctx)
		if err != nil {
			e.o.log.Warn().Err(err).Msg("slurmctld boot time unknown: tied Fair Tree siblings may rank in another order")
		}
		e.boot = boot
	}
	t0 := e.now()
	in, rd, err := e.read(ctx, name, &cs.ref, at)
	e.RecordStage(result.StageDB, e.now().Sub(t0), err)
	if err != nil {
		var conn interface{ Timeout() bool }
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &conn) {
			// a connection may be wedged (held lock); start afresh
			e.Close()
		}
		return nil, err
	}
	e.save(name, cs)
	t1 := e.now()
	cs.cluster = rd.cluster
	err = e.extras(ctx, cs, in, rd)
	e.RecordStage(result.StageExtras, e.now().Sub(t1), err)
	if err != nil && ctx.Err() == nil {
		e.o.log.Warn().Err(err).Str("slurm_cluster", name).Msg("pending jobs or Maui windows")
	}
	return in, nil
}

// RefreshAtReport rebuilds the local cluster's tree at a report's moment,
// from the last refresh's state: usage moves at every decay pass.
func (e *Engine) RefreshAtReport(ctx context.Context, at time.Time) (*build.Inputs, error) {
	cs := e.clusters[e.conf.ClusterName]
	if cs == nil || e.src == nil {
		return nil, nil
	}
	t0, readAt := e.now(), e.o.clock.Now()
	cs.atReport.Seed(&cs.ref)
	in, _, err := e.read(ctx, e.conf.ClusterName, &cs.atReport, at)
	if in != nil {
		in.ReadAt = readAt
	}
	e.RecordStage(result.StageDB, e.now().Sub(t0), err)
	return in, err
}

// WaitRecorded waits until the database holds every job end slurmctld
// had charged by a report read until end: build.RecordDelay after it, under
// AccountingStorageEnforce=limits (without it, ends are charged only at
// passes, which the rebuild places itself). serve and check take a
// report up only then, and the database read at its moment holds them.
// It is false when ctx ended first.
func (e *Engine) WaitRecorded(ctx context.Context, end time.Time) bool {
	if !e.conf.EnforceLimits() {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(e.o.clock.Until(end.Add(build.RecordDelay))):
		return true
	}
}

// RecordStage records a run of a refresh's stage (result.Stage*): how long
// it took, and a failure when err is not nil.
func (e *Engine) RecordStage(name string, took time.Duration, err error) {
	st := e.stages[name]
	st.Duration = took
	if err != nil {
		st.Errors++
	}
	e.stages[name] = st
}

// ReloadConf reads slurm.conf again (WithReload), keeping the settings
// last read when it fails, and reports whether the priority settings
// changed.
func (e *Engine) ReloadConf() (changed bool) {
	if e.o.loadConf == nil {
		return false
	}
	t0 := e.now()
	conf, err := e.o.loadConf()
	e.RecordStage(result.StageConfig, e.now().Sub(t0), err)
	if err != nil {
		e.o.log.Error().Err(err).Msg("slurm.conf: keeping the settings last read")
		return false
	}
	changed = settings(conf) != settings(e.conf)
	e.conf = conf
	return changed
}

// open opens the database unless it is open.
func (e *Engine) open(ctx context.Context) error {
	switch {
	case e.src != nil:
		return nil
	case e.o.source != nil:
		e.src = e.o.source
		return nil
	}
	db, err := slurmdbd.Open(ctx, e.dsn, e.o.queryTimeout)
	if err != nil {
		return err
	}
	e.src = dbSource{db, e.o.allTRES}
	return nil
}

// Clusters are the clusters to read: WithClusters', or every one in
// cluster_table.
func (e *Engine) Clusters(ctx context.Context) ([]string, error) {
	if err := e.open(ctx); err != nil || len(e.o.names) > 0 {
		return e.o.names, err
	}
	return e.src.Clusters(ctx)
}

// phase is what is known of the local cluster's pass phase at at: the
// state file's, when it was written by the boot of slurmctld running at
// at (stateFileFor), else the tracker's inference, else unknown (err says
// why the state file was not used).
func (e *Engine) phase(conf *slurmconf.Config, local bool, at time.Time) (fairshare.Passes, time.Time, result.Phase, error) {
	stateDir := ""
	if local {
		stateDir = e.o.stateDir // the phase of other clusters' passes is unknown
	}
	sched, since, err := Decay(conf, stateDir)
	if err == nil {
		if err = e.stateFileFor(sched, conf, at); err != nil {
			sched.Phase, since = 0, time.Time{}
		}
	}
	phase := result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second} // last_decay_ran is whole seconds
	if err != nil {
		phase = result.Phase{Source: result.PhaseUnknown, Uncertainty: conf.PriorityCalcPeriod}
		if pass, u, ok := e.o.tracker.pass(local, at); ok {
			// passes fall on whole seconds (an absolute deadline of
			// whole seconds); a phase that moves by less would make the
			// rebuild read everything again
			sched.Phase = math.Round(fairshare.Seconds(pass))
			phase = result.Phase{Source: result.PhaseInferred, Uncertainty: u + time.Second}
			err = nil
		} else if local && e.o.tracker == nil && !e.boot.IsZero() && !at.Before(e.boot) {
			// a replay, which has no reads: the passes of a boot fall
			// within passes.BootPhase of it (TestBootPhase), stamped in
			// whole seconds like the state file's
			sched.Phase = float64(e.boot.Add(passes.BootPhase / 2).Unix())
			phase = result.Phase{Source: result.PhaseBoot, Uncertainty: passes.BootPhase/2 + time.Second}
			err = nil
		} else if stateDir == "" {
			err = nil // not asked for: nothing to warn of
		}
	}
	if phase.Source != result.PhaseUnknown && sched.Period > 0 {
		phase.Last = time.Unix(int64(sched.LastPass(fairshare.Seconds(at))), 0)
	}
	return sched, since, phase, err
}

// stateFileFor says why a state file whose last pass is passes.Phase does
// not give the phase at at: slurmctld starts its passes at a new phase at
// every start, so the file holds the phase of the boot that wrote it
// alone. With the boot known, it must have started by at and written the
// file; without it, the file's pass must be within a period (and a moment)
// of at, as a live read's is: a past --at, or a file saved at another
// moment, takes no phase from today's file. The errors name no moment
// that moves, so that serve warns of each once (warnChanged).
func (e *Engine) stateFileFor(passes fairshare.Passes, conf *slurmconf.Config, at time.Time) error {
	ran := time.Unix(int64(passes.Phase), 0)
	const moment = 5 * time.Second // a live read of sshare, then of the file
	switch {
	case !e.boot.IsZero() && (at.Before(e.boot) || ran.Before(e.boot)):
		return fmt.Errorf("priority_last_decay_ran (%s) is not of the boot of slurmctld running at the moment computed (started %s)", ran.Format(time.RFC3339), e.boot.Format(time.RFC3339))
	case e.boot.IsZero() && (ran.Sub(at) > conf.PriorityCalcPeriod+moment || at.Sub(ran) > conf.PriorityCalcPeriod+moment):
		return fmt.Errorf("priority_last_decay_ran (%s) is more than a PriorityCalcPeriod from the moment computed and slurmctld's boot is unknown: it may be another boot's", ran.Format(time.RFC3339))
	}
	return nil
}

func (e *Engine) read(ctx context.Context, name string, ref *slurmdbd.Refresher, at time.Time) (*build.Inputs, *dbRead, error) {
	if err := e.open(ctx); err != nil {
		return nil, nil, err
	}
	c, err := e.src.Cluster(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	conf := e.conf
	local := name == conf.ClusterName
	var problems []problem
	passes, since, phase, err := e.phase(conf, local, at)
	if err != nil {
		problems = append(problems, problemOf(fmt.Errorf("decay pass phase unknown: usage may be off by one PriorityCalcPeriod: %w", err)))
	}
	ref.Passes, ref.Since, ref.Location = passes, since, time.Local
	rules := billingRules(conf)
	if local {
		ref.Boot, ref.Billing = e.boot, &rules
	}
	snap, err := c.Refresh(ctx, ref, at)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range snap.Problems {
		problems = append(problems, problemOf(p))
	}
	var schema *result.Schema
	if _, db := c.(dbCluster); db {
		schema = e.noteSchema(name, snap.Layout)
	}
	tree, err := fairshare.NewTree(snap.Tree.Assocs)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	in := &build.Inputs{
		Name:     name,
		Settings: settings(conf),
		Database: build.Database{
			Tree:          tree,
			TieOrderKnown: local && !e.boot.IsZero(),
			Boot:          ref.Boot,
			Passes:        passes,
			Phase:         phase,
			TRES:          map[string][]float64{},
			Computed:      at,
			Schema:        schema,
		},
		Options: build.Options{Maui: e.o.maui, Tolerance: e.o.tolerance, Named: e.o.named},
	}
	for _, p := range setTRES(in, snap) {
		problems = append(problems, problem{p, p})
	}
	if local {
		problems = append(problems, checkBilling(in, snap.Jobs, snap.TRESNames, conf, rules)...)
	}
	ids := treeIDs(snap)
	if local && !e.boot.IsZero() {
		if err := e.setBoot(ctx, c, in, since, ids); err != nil {
			problems = append(problems, problemOf(fmt.Errorf("the usage charged before slurmctld started is bounded as if all of it were, and the tails of jobs that ended by then by a whole PriorityCalcPeriod: %w", err)))
		}
	}
	e.warnChanged(name, problems)
	in.Uncharged, in.Running, in.TailRisk, in.Unpriced = snap.Uncharged, snap.Running, snap.TailRisk, snap.Unpriced
	if snap.LastRan.OK {
		in.LastRollup = time.Unix(snap.LastRan.Hourly, 0)
	}
	in.AssocIDs = ids
	rd := &dbRead{cluster: c, tresNames: snap.TRESNames, qos: snap.QOS}
	if conf.PriorityWeightAssoc > 0 {
		rowPrio := slurmdbd.InheritedPriority(snap.Rows)
		rd.assocPriority = make([]uint32, len(ids))
		for i, r := range snap.Tree.Row {
			rd.assocPriority[i] = rowPrio[r]
		}
	}
	return in, rd, nil
}

// dbRead is what a refresh's extras read by, beside the inputs: where
// the cluster is read, and the names and priorities of its rows.
type dbRead struct {
	cluster       ClusterSource
	tresNames     map[uint32]string
	qos           map[uint32]slurmdbd.QOS
	assocPriority []uint32 // inherited priority of each association (nil: weight 0)
}

// treeIDs are the id_assoc of snap's tree associations, in the tree's
// order.
func treeIDs(snap *slurmdbd.Snapshot) []uint32 {
	ids := make([]uint32, len(snap.Tree.Row))
	for i, r := range snap.Tree.Row {
		ids[i] = snap.Rows[r].ID
	}
	return ids
}

// noteSchema is the schema of l, logged when first seen for the cluster
// and whenever it changes (a slurmdbd upgrade, which the Refresher looks
// for every slurmdbd.RecheckHours): which columns the exporter reads the
// tree and usage by is otherwise shown only by the schema_info metric.
func (e *Engine) noteSchema(name string, l slurmdbd.Layout) *result.Schema {
	s := &result.Schema{LftRgt: l.LftRgt, Lineage: l.Lineage, AccountFlags: l.AcctFlags, QOSUsage: l.QOSUsage}
	cs := e.clusters[name]
	if cs == nil || (cs.schema != nil && *cs.schema == *s) {
		return s
	}
	msg := "slurmdbd schema detected"
	if cs.schema != nil {
		msg = "slurmdbd schema changed"
	}
	cs.schema = s
	e.o.log.Info().Str("slurm_cluster", name).Bool("lft_rgt", s.LftRgt).Bool("lineage", s.Lineage).
		Bool("account_flags", s.AccountFlags).Bool("qos_usage", s.QOSUsage).Msg(msg)
	return s
}

// tailHalfLives: the tails of jobs that ended more than this many
// half-lives before the moment weigh below 1e-6 of their usage.
const tailHalfLives = 20

// setBoot sets in's BootUsage and, where the phase is known and tails are
// left uncharged (no AccountingStorageEnforce=limits), BootTails.
func (e *Engine) setBoot(ctx context.Context, c ClusterSource, in *build.Inputs, since time.Time, ids []uint32) error {
	tails, boot, err := e.bootSums(ctx, in.Name, c, in.Passes, since, in.Computed, ids)
	if err != nil {
		return err
	}
	if in.Phase.Source != result.PhaseUnknown && !in.Passes.ChargeJobEnd {
		in.BootTails = tails
	}
	in.BootUsage = boot
	return nil
}

// bootSums is, per association of ids, the tail sums (usage.TailRisk's
// Rate and Most) of the jobs that ended before slurmctld's boot and the
// usage charged before it, decayed to at: the rebuild at the boot's sums,
// kept per boot and settings (one cold load per boot), times d^(at-boot),
// which is exact for what ended by then.
func (e *Engine) bootSums(ctx context.Context, name string, c ClusterSource, passes fairshare.Passes, since, at time.Time, ids []uint32) (*usage.TailRisk, []float64, error) {
	out, raw := &usage.TailRisk{Rate: make([]float64, len(ids)), Most: make([]float64, len(ids))}, make([]float64, len(ids))
	age := at.Sub(e.boot).Seconds()
	if hl := passes.HalfLife; hl > 0 && age > tailHalfLives*hl {
		return out, raw, nil
	}
	cs := e.clusters[name]
	key := bootKey{e.boot, passes, since}
	key.passes.Phase = 0 // the tails' Rate and Most do not depend on it; the last pass moves every period
	if cs.bootSums == nil || cs.bootKey != key {
		snap, err := c.SnapshotAsCtld(ctx, e.boot, e.boot, passes, since, time.Local)
		if err != nil {
			return nil, nil, err
		}
		cs.bootSums, cs.bootKey = map[uint32][3]float64{}, key
		t := snap.TailRisk
		for i, r := range snap.Tree.Row {
			v := [3]float64{2: snap.Tree.Assocs[i].RawUsage}
			if t.Rate != nil {
				v[0], v[1] = t.Rate[i], t.Most[i]
			}
			cs.bootSums[snap.Rows[r].ID] = v
		}
	}
	k := math.Pow(passes.D(), max(0, age))
	for i, id := range ids {
		v := cs.bootSums[id]
		out.Rate[i], out.Most[i], raw[i] = v[0]*k, v[1]*k, v[2]*k
	}
	return out, raw, nil
}

// setTRES keeps the decayed usage of each TRES but billing (the usage
// itself), by name, and returns the problems it met.
func setTRES(in *build.Inputs, snap *slurmdbd.Snapshot) (problems []string) {
	for id, v := range snap.TRES {
		if id == slurmdbd.TRESBilling {
			continue
		}
		n := snap.TRESNames[id]
		if n == "" {
			n = fmt.Sprintf("tres_%d", id)
			problems = append(problems, fmt.Sprintf("usage rows of id_tres=%d, which tres_table does not list: exported as tres=%q", id, n))
		}
		in.TRES[n] = v
	}
	return problems
}

// problem is a data problem to warn of: its identity and its message.
type problem struct{ id, msg string }

// problemOf is err's problem: a usage.Problem names its identity, any
// other error is its message.
func problemOf(err error) problem {
	if p, ok := errors.AsType[*usage.Problem](err); ok {
		return problem{p.Identity, err.Error()}
	}
	return problem{err.Error(), err.Error()}
}

// warnChanged logs each of a cluster's data problems when it first
// appears, by its identity: a bad row stays bad at every refresh, and
// logging it every minute (or again whenever a value in its message
// decayed) buried everything else.
func (e *Engine) warnChanged(cluster string, problems []problem) {
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		if !e.warned[cluster][p.id] {
			e.o.log.Warn().Str("slurm_cluster", cluster).Msg(p.msg)
		}
		seen[p.id] = true
	}
	if len(problems) > 0 {
		e.o.log.Debug().Str("slurm_cluster", cluster).Int("problems", len(problems)).Msg("data problems left out of this refresh (each warned once)")
	}
	e.warned[cluster] = seen
}

// extras reads what the per-association factors do not need: pending jobs
// for their priorities and the ticket-based active set, usage windows for
// Maui (again only after a new hourly rollup).
func (e *Engine) extras(ctx context.Context, cs *clusterState, in *build.Inputs, rd *dbRead) error {
	prio, rows, err := e.pendingJobs(ctx, rd, in)
	if err != nil {
		return err
	}
	in.Priorities = prio
	if !e.o.whatIf {
		return nil
	}
	pending := map[uint32]bool{}
	for _, r := range rows {
		pending[r.Assoc] = true
	}
	in.Pending = make([]bool, len(in.AssocIDs))
	for i, id := range in.AssocIDs {
		in.Pending[i] = pending[id]
	}
	if e.o.mauiInterval <= 0 {
		return nil
	}
	rollup := in.LastRollup.Unix()
	if cs.maui == nil || cs.mauiRollup != rollup || len(cs.maui) != len(in.AssocIDs) {
		windows, err := rd.cluster.WindowUsage(ctx, in.Computed, e.o.mauiInterval, e.o.maui.Depth)
		if err != nil {
			return err
		}
		cs.maui, cs.mauiRollup = mauiUsage(in.Tree, in.AssocIDs, windows, e.o.maui), rollup
	}
	in.MauiUsage = cs.maui
	return nil
}

// ForecastInputs reads what the recovery forecast assumes of the future:
// the jobs running at in.Computed, each until its time limit, and every
// association's own usage rate over the last window of rolled-up hours
// (the hours after the last rollup are not in the tables yet). Jobs and
// usage of associations outside the tree (removed users) are left out.
func (e *Engine) ForecastInputs(ctx context.Context, in *build.Inputs, window time.Duration) error {
	index := make(map[uint32]int, len(in.AssocIDs))
	for i, id := range in.AssocIDs {
		index[id] = i
	}
	c := e.clusters[in.Name]
	if c == nil || c.cluster == nil {
		return fmt.Errorf("cluster %s: not read", in.Name)
	}
	jobs, problems, err := c.cluster.RunningJobs(ctx, in.Computed)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		e.o.log.Warn().Err(problems[0]).Int("jobs", len(problems)).Msg("running jobs left out of the forecast")
	}
	in.ForecastJobs = nil
	for _, j := range jobs {
		i, ok := index[j.Assoc]
		if !ok {
			continue
		}
		end := math.Inf(1)
		if j.LimitEnd > 0 {
			end = float64(j.LimitEnd)
		}
		in.ForecastJobs = append(in.ForecastJobs, fairshare.RunningJob{Assoc: i, Billing: j.Billing, Start: float64(j.Start), End: end})
	}
	in.ForecastRate = make([]float64, len(in.AssocIDs))
	in.ForecastWindow = window
	if in.LastRollup.IsZero() {
		return nil
	}
	used, err := c.cluster.BillingUsage(ctx, in.LastRollup.Add(-window), in.LastRollup)
	if err != nil {
		return err
	}
	for id, v := range used {
		if i, ok := index[id]; ok {
			in.ForecastRate[i] += v / window.Seconds()
		}
	}
	return nil
}

// mauiUsage is each association's share of the cluster's windowed usage:
// a user's own, an account's summed over its subtree.
func mauiUsage(t *fairshare.Tree, ids []uint32, windows map[uint32][]float64, c fairshare.MauiConfig) []float64 {
	n := t.Len()
	used := make([][]float64, n)
	for i := n - 1; i >= 0; i-- {
		if used[i] == nil {
			used[i] = make([]float64, c.Depth)
		}
		for k, v := range windows[ids[i]] {
			used[i][k] += v
		}
		if p := t.Association(i).Parent; p >= 0 {
			if used[p] == nil {
				used[p] = make([]float64, c.Depth)
			}
			for k, v := range used[i] {
				used[p][k] += v
			}
		}
	}
	total := used[t.Root()]
	out := make([]float64, n)
	for i := range out {
		out[i] = fairshare.MauiUsage(used[i], total, c)
	}
	return out
}

// Decay is how slurmctld decays usage under conf: the passes, with their
// phase read from stateDir's priority_last_decay_ran, and the last usage
// reset when PriorityUsageResetPeriod sets one. Without a readable state
// file the phase is 0 (unknown) and err says why.
func Decay(conf *slurmconf.Config, stateDir string) (passes fairshare.Passes, since time.Time, err error) {
	passes = conf.Passes()
	ran, reset, err := slurmstate.LastDecayRan(stateDir)
	if err != nil {
		return passes, since, err
	}
	passes.Phase = float64(ran.Unix())
	if conf.ResetsUsage() {
		since = reset
	}
	return passes, since, nil
}

func settings(conf *slurmconf.Config) build.Settings {
	return build.Settings{
		Algorithm: conf.Algorithm(),
		Dampening: float64(conf.FairShareDampeningFactor),
		Config: result.Config{
			PriorityFlags: strings.Join(conf.PriorityFlagNames, ","),
			HalfLife:      conf.PriorityDecayHalfLife,
			CalcPeriod:    conf.PriorityCalcPeriod,
			Dampening:     conf.FairShareDampeningFactor,
			ResetPeriod:   conf.PriorityUsageResetPeriod,
		},
	}
}
