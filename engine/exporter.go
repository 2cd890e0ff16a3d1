package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// Publisher serves what a refresh computed.
type Publisher interface {
	Publish(*result.Snapshot) error
}

// ReportFunc reads what Slurm reports (sshare, slurmrestd).
type ReportFunc func(ctx context.Context) (*shares.Table, error)

// Stages of a refresh, as the stage label of the exporter's metrics.
const (
	StageConfig   = "config"   // reading slurm.conf
	StageConnect  = "connect"  // opening the database
	StageDB       = "db"       // reading associations and rebuilding usage
	StageExtras   = "extras"   // pending jobs and Maui windows
	StageReported = "reported" // sshare or slurmrestd
	StageBuild    = "build"    // algorithms and drift
	StagePublish  = "publish"  // rendering the exposition
	StageForecast = "forecast" // the recovery metric's inputs and forecast
)

// Exporter reads the sources on its own schedule and publishes snapshots
// to Collector; scrapes never wait for it.
type Exporter struct {
	// DSN opens the database; it is opened again after a failure.
	DSN string
	// Clusters to read; empty: every cluster in cluster_table.
	Clusters []string
	// Conf holds the priority settings; LoadConf, if set, reads them again
	// at every refresh (slurm.conf changes with scontrol reconfigure), and
	// a failure keeps the last good ones.
	Conf     *slurmconf.Config
	LoadConf func() (*slurmconf.Config, error)
	// StateDir is slurmctld's StateSaveLocation, for the decay pass phase
	// of Conf.ClusterName ("": unknown).
	StateDir string
	Interval time.Duration
	// Report reads what slurmctld reports about Conf.ClusterName (nil:
	// nothing is compared). BootTime, if set, says when slurmctld started.
	Report           ReportFunc
	BootTime         func(ctx context.Context) (time.Time, error)
	ReportedInterval time.Duration
	ReportedTimeout  time.Duration
	// StaleAfter withdraws a report this old.
	StaleAfter time.Duration
	Tolerance  drift.Tolerance
	// Maui is the what-if view's configuration; MauiInterval 0 turns it
	// off.
	Maui         fairshare.MauiConfig
	MauiInterval time.Duration
	// WhatIf computes the what-if views (ticket-based, Maui), which only
	// --collector.extended exports and explain shows.
	WhatIf bool
	// AllTRES reads every TRES's usage, which only --collector.extended
	// exports; otherwise billing alone (slurmdbd.Cluster.AllTRES).
	AllTRES bool
	// Collector renders each snapshot (collector.Collector, which also
	// applies the series budget).
	Collector Publisher
	Log       zerolog.Logger
	// QueryTimeout bounds each query (0: slurmdbd.DefaultTimeout).
	QueryTimeout time.Duration
	// StoragePath is a directory to keep each cluster's frozen usage in
	// across restarts ("": none).
	StoragePath string
	// ForecastWindow reads what the recovery forecast assumes (0: off):
	// the running jobs and each association's usage rate over this much
	// rolled-up time (Inputs.Forecast).
	ForecastWindow time.Duration
	// RecoveryInterval computes the recovery metric (Inputs.ComputeRecovery)
	// at most this often, with ForecastWindow (0: off); the last good one
	// is served in between, with its moment.
	RecoveryInterval time.Duration

	now   func() time.Time
	db    *slurmdbd.DB
	phase phase
	// settingsAt is when slurm.conf's priority settings last changed
	settingsAt time.Time
	clusters   map[string]*clusterState
	sources    map[string]result.Source
	stages     map[string]result.Stage
	report     *reportState
	boot       time.Time
	ready      atomic.Bool
	clusterUp  map[string]bool
	// dropped: associations the series budget left out of each cluster
	// at the last publish (warned when it grows)
	dropped map[string]int
	// warned: each cluster's data problems at its last refresh
	warned map[string]map[string]bool
	// recoveries hands the recovery metric's computations back to Run's
	// loop (nil: computed in the refresh)
	recoveries chan recoveryResult
}

type clusterState struct {
	ref  slurmdbd.Refresher
	last *Inputs // the last good computation
	memo BuildMemo
	// atReport rebuilds usage at the moments of the reports, with a
	// Refresher of its own: each moves forward in time.
	atReport    slurmdbd.Refresher
	reportDB    *fairshare.Tree
	reportFor   time.Time
	reportPass  drift.PassError
	reportPhase result.Phase
	// mauiRollup is the hourly rollup the Maui windows were read at.
	mauiRollup int64
	maui       []float64
	// savedFreezes is ref.Freezes when it was last saved.
	savedFreezes int
	recovery     *result.Recovery
	// recovering: a computation of the recovery metric is under way
	recovering bool
	// refreshTook is the last refresh's cost (database and extras), and
	// recoveryTook the last recovery computation's: recoveryEvery
	refreshTook, recoveryTook time.Duration
}

type reportState struct {
	out     *shares.Table
	at      time.Time
	raw     map[drift.Key]float64
	prevRaw map[drift.Key]float64
	prevAt  time.Time
	// passRaw is the first report after the last pass seen, read up to
	// passGap after it (from the read before)
	passRaw map[drift.Key]float64
	passAt  time.Time
	passGap time.Duration
	start   time.Time // of the read
	memo    *ReportMemo
	// settling: drift.Input.Settling
	settling bool
}

// Ready reports whether the computation of a good database refresh has
// been published.
func (e *Exporter) Ready() bool { return e.ready.Load() }

type reportResult struct {
	out *shares.Table
	raw map[drift.Key]float64 // out's RawUsage
	// pass: slurmctld ran a decay pass since the read before
	pass, settling bool
	// at is the middle of the read, from start to end
	at, start, end time.Time
	boot           time.Time
	took           time.Duration
	err            error
}

// Run refreshes until ctx ends.
func (e *Exporter) Run(ctx context.Context) {
	if e.now == nil {
		e.now = time.Now
	}
	e.clusters = map[string]*clusterState{}
	e.clusterUp = map[string]bool{}
	e.phase.setPeriod(e.Conf.PriorityCalcPeriod)
	e.sources = map[string]result.Source{"db": {}}
	e.stages = map[string]result.Stage{}
	reports := make(chan reportResult)
	e.recoveries = make(chan recoveryResult)
	if e.Report != nil {
		e.sources["reported"] = result.Source{}
	}
	defer e.closeDB()
	tick := time.NewTicker(e.Interval)
	defer tick.Stop()
	stale := time.NewTimer(time.Hour)
	stale.Stop()
	e.refreshAll(ctx, e.now())
	e.publish()
	if e.Report != nil {
		// After the first refresh: a report is only compared with the
		// database, and at 100k associations sshare and a cold load
		// would share the cores (and slurmctld the head node's).
		go e.reportLoop(ctx, reports)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			e.refreshAll(ctx, e.now())
		case r := <-reports:
			e.onReport(ctx, r)
			if e.report != nil {
				stale.Reset(e.report.at.Add(e.StaleAfter).Sub(e.now()) + time.Second)
			}
		case <-stale.C:
		case r := <-e.recoveries:
			e.recovered(r)
		}
		e.publish()
	}
}

// reportLoop reads the reported side every ReportedInterval, each read
// bounded by ReportedTimeout.
func (e *Exporter) reportLoop(ctx context.Context, out chan<- reportResult) {
	for {
		var r reportResult
		start := e.now()
		rctx, cancel := context.WithTimeout(ctx, e.ReportedTimeout)
		if e.BootTime != nil {
			var err error
			if r.boot, err = e.BootTime(rctx); err != nil {
				e.Log.Warn().Err(err).Msg("slurmctld boot time unknown: tied Fair Tree siblings are compared by rank range")
			}
		}
		t0 := e.now()
		r.out, r.err = e.Report(rctx)
		t1 := e.now()
		cancel()
		r.at, r.start, r.end, r.took = t0.Add(t1.Sub(t0)/2), t0, t1, t1.Sub(start)
		if r.err == nil {
			r.raw = drift.RawByKey(r.out)
			r.pass, r.settling = e.observe(t0, t1, r.boot, r.out)
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(e.nextRead(t0, t1).Sub(e.now())):
		case <-ctx.Done():
			return
		}
	}
}

func (e *Exporter) stage(name string, took time.Duration, err error) {
	st := e.stages[name]
	st.Duration = took
	if err != nil {
		st.Errors++
	}
	e.stages[name] = st
}

func (e *Exporter) source(name string, ok bool, at time.Time) {
	s := e.sources[name]
	s.Up = ok
	if ok {
		s.LastSuccess = at
	}
	e.sources[name] = s
}

func (e *Exporter) onReport(ctx context.Context, r reportResult) {
	e.stage(StageReported, r.took, r.err)
	if r.err != nil {
		e.Log.Error().Err(r.err).Msg("reading what Slurm reports")
		e.source("reported", false, time.Time{})
		return
	}
	if !r.boot.IsZero() {
		e.boot = r.boot
	}
	r.out.FillMissingFactor(float64(e.Conf.FairShareDampeningFactor))
	raw := r.raw
	rs := &reportState{out: r.out, at: r.at, raw: raw, memo: &ReportMemo{}, start: r.start, settling: r.settling}
	if p := e.report; p != nil {
		// the last report whose usage differs came before slurmctld's
		// last decay pass: usage changes at passes (and at job ends
		// under limits: PassRaw)
		rs.prevRaw, rs.prevAt, rs.passRaw, rs.passAt, rs.passGap = p.prevRaw, p.prevAt, p.passRaw, p.passAt, p.passGap
		if !maps.Equal(p.raw, raw) {
			rs.prevRaw, rs.prevAt = p.raw, p.at
		}
		if r.pass {
			rs.passRaw, rs.passAt, rs.passGap = raw, r.at, r.end.Sub(p.start)
		}
	}
	e.report = rs
	e.source("reported", true, r.at)
	// compare with the database's usage at the moment of the report:
	// usage moves at every decay pass
	if cs := e.clusters[e.Conf.ClusterName]; cs != nil && e.db != nil {
		t0 := e.now()
		cs.atReport.Seed(&cs.ref)
		in, err := e.read(ctx, e.Conf.ClusterName, &cs.atReport, r.at)
		e.stage(StageDB, e.now().Sub(t0), err)
		if err != nil {
			e.Log.Error().Err(err).Msg("refresh from the database at the moment of the report")
			return
		}
		pass := in.PassError(&[2]time.Time{r.start, r.end})
		cs.reportDB, cs.reportFor, cs.reportPass = in.Tree, r.at, pass
		cs.reportPhase = in.Phase
		cs.reportPhase.Uncertainty = time.Duration(pass.Window * float64(time.Second))
	}
}

// reloadConf reads slurm.conf again (LoadConf), keeping the settings last
// read when it fails.
func (e *Exporter) reloadConf() {
	if e.LoadConf == nil {
		return
	}
	t0 := e.now()
	conf, err := e.LoadConf()
	e.stage(StageConfig, e.now().Sub(t0), err)
	if err != nil {
		e.Log.Error().Err(err).Msg("slurm.conf: keeping the settings last read")
		return
	}
	if settings(conf) != settings(e.Conf) {
		// a report read under the old settings is not compared with the
		// new: slurmctld may have taken them up since (a restart; from
		// 23.11 scontrol reconfigure is one)
		e.settingsAt = e.now()
	}
	e.Conf = conf
}

// reportStale: there is no report, or it is too old to serve.
func (e *Exporter) reportStale() bool {
	return e.report == nil || e.now().Sub(e.report.at) > e.StaleAfter
}

// freshReport is the report if it is recent enough to compare.
func (e *Exporter) freshReport() *Report {
	r := e.report
	if e.reportStale() || r.at.Before(e.settingsAt) {
		return nil
	}
	rep := &Report{Out: r.out, At: r.at, Memo: r.memo, Settling: r.settling}
	if r.prevRaw != nil && r.at.Sub(r.prevAt) <= 3*e.Conf.PriorityCalcPeriod {
		rep.PrevRaw = r.prevRaw
	}
	if r.passRaw != nil && !maps.Equal(r.passRaw, r.raw) && r.at.Sub(r.passAt) <= e.Conf.PriorityCalcPeriod {
		rep.PassRaw, rep.PassGap = r.passRaw, r.passGap
	}
	return rep
}

// open opens the database unless it is open.
func (e *Exporter) open(ctx context.Context) error {
	if e.db != nil {
		return nil
	}
	db, err := slurmdbd.Open(ctx, e.DSN, e.QueryTimeout)
	if err != nil {
		return err
	}
	e.db = db
	return nil
}

// clusterNames are the clusters to read.
func (e *Exporter) clusterNames(ctx context.Context) ([]string, error) {
	if err := e.open(ctx); err != nil || len(e.Clusters) > 0 {
		return e.Clusters, err
	}
	return e.db.Clusters(ctx)
}

func (e *Exporter) refreshAll(ctx context.Context, at time.Time) {
	e.reloadConf()
	e.phase.setPeriod(e.Conf.PriorityCalcPeriod)
	t0 := e.now()
	names, err := e.clusterNames(ctx)
	e.stage(StageConnect, e.now().Sub(t0), err)
	if err != nil {
		e.Log.Error().Err(err).Msg("database")
		e.source("db", false, time.Time{})
		return
	}
	ok := true
	for _, name := range names {
		cs := e.clusters[name]
		if cs == nil {
			cs = &clusterState{}
			e.clusters[name] = cs
			e.restore(name, cs)
		}
		err := e.refreshCluster(ctx, name, cs, at)
		e.clusterUp[name] = err == nil
		if errors.Is(err, slurmdbd.ErrNoTables) {
			// cluster_up says so; the other clusters are the database's
			// health
			e.warnChanged(name, []string{err.Error()})
			continue
		}
		if err != nil {
			e.Log.Error().Err(err).Str("slurm_cluster", name).Msg("refresh from the database")
		}
		ok = ok && err == nil
	}
	for name := range e.clusters {
		if !slices.Contains(names, name) {
			delete(e.clusters, name) // removed from cluster_table
			delete(e.clusterUp, name)
		}
	}
	e.source("db", ok, at)
}

// refreshCluster rebuilds one cluster at at; on failure the last good
// computation stays.
func (e *Exporter) refreshCluster(ctx context.Context, name string, cs *clusterState, at time.Time) error {
	t0 := e.now()
	in, err := e.read(ctx, name, &cs.ref, at)
	e.stage(StageDB, e.now().Sub(t0), err)
	if err != nil {
		var conn interface{ Timeout() bool }
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &conn) {
			// a connection may be wedged (held lock); start afresh
			e.closeDB()
		}
		return err
	}
	e.save(name, cs)
	t1 := e.now()
	err = e.extras(ctx, cs.ref.Cluster, cs, in)
	e.stage(StageExtras, e.now().Sub(t1), err)
	if err != nil {
		e.Log.Warn().Err(err).Str("slurm_cluster", name).Msg("pending jobs or Maui windows")
	}
	cs.refreshTook = e.now().Sub(t0)
	e.recover(ctx, cs, in)
	cs.last = in
	return nil
}

// RecoveryBudget is the most the recovery metric may cost, amortized over
// the refreshes between two computations, as a share of a steady refresh.
const RecoveryBudget = 0.2

// recoveryEvery is how often the recovery metric is computed: every
// RecoveryInterval, or less often when its last computation cost more
// than RecoveryBudget of the refreshes in between (under Fair Tree, users
// whose runs break at many job ends: docs/performance.md).
func (e *Exporter) recoveryEvery(cs *clusterState) time.Duration {
	every := e.RecoveryInterval
	if cs.refreshTook > 0 && e.Interval > 0 {
		refreshes := float64(cs.recoveryTook) / (RecoveryBudget * float64(cs.refreshTook))
		every = max(every, time.Duration(refreshes*float64(e.Interval)))
	}
	return every
}

// recover starts the recovery metric's computation when the last is
// recoveryEvery old and none is under way: its inputs are read here,
// the forecast of every user runs off the refresh loop (at 100k
// associations under Fair Tree it takes seconds, docs/performance.md)
// and comes back through e.recoveries (recovered). Without Run's loop
// (a test calling refreshAll) it runs here.
func (e *Exporter) recover(ctx context.Context, cs *clusterState, in *Inputs) {
	if e.RecoveryInterval <= 0 || e.ForecastWindow <= 0 || cs.recovering {
		return
	}
	if r := cs.recovery; r != nil && in.Computed.Sub(r.Computed) < e.recoveryEvery(cs) {
		return
	}
	t0 := e.now()
	if err := e.forecastInputs(ctx, cs.ref.Cluster, in); err != nil {
		e.recovered(recoveryResult{name: in.Name, took: e.now().Sub(t0), err: err})
		return
	}
	read := e.now().Sub(t0)
	c := *in // the loop's next refresh makes new inputs: this one stays as it is
	compute := func() recoveryResult {
		t1 := time.Now()
		r, err := c.ComputeRecovery()
		return recoveryResult{name: c.Name, r: r, err: err, took: read + time.Since(t1)}
	}
	if e.recoveries == nil {
		e.recovered(compute())
		return
	}
	cs.recovering = true
	go func() {
		r := compute()
		select {
		case e.recoveries <- r:
		case <-ctx.Done():
		}
	}()
}

type recoveryResult struct {
	name string
	r    *result.Recovery
	err  error
	took time.Duration
}

// recovered keeps a computation of the recovery metric; a failure keeps
// the last one.
func (e *Exporter) recovered(r recoveryResult) {
	e.stage(StageForecast, r.took, r.err)
	cs := e.clusters[r.name]
	if cs != nil {
		cs.recovering, cs.recoveryTook = false, r.took
	}
	if r.err != nil {
		e.Log.Warn().Err(r.err).Str("slurm_cluster", r.name).Msg("recovery forecast: serving the last one")
		return
	}
	if cs != nil {
		cs.recovery = r.r
	}
}

func (e *Exporter) closeDB() {
	if e.db != nil {
		e.db.Close()
		e.db = nil
	}
}

func (e *Exporter) read(ctx context.Context, name string, ref *slurmdbd.Refresher, at time.Time) (*Inputs, error) {
	if err := e.open(ctx); err != nil {
		return nil, err
	}
	c, err := e.db.Cluster(ctx, name)
	if err != nil {
		return nil, err
	}
	c.AllTRES = e.AllTRES
	conf := e.Conf
	local := name == conf.ClusterName
	stateDir := ""
	if local {
		stateDir = e.StateDir // the phase of other clusters' passes is unknown
	}
	var problems []string
	passes, since, err := Decay(conf, stateDir)
	phase := result.Phase{Source: result.PhaseStateFile, Uncertainty: time.Second} // last_decay_ran is whole seconds
	if err != nil {
		phase = result.Phase{Source: result.PhaseUnknown, Uncertainty: conf.PriorityCalcPeriod}
		if pass, u, ok := e.inferredPass(local, at); ok {
			// passes fall on whole seconds (an absolute deadline of
			// whole seconds); a phase that moves by less would make the
			// rebuild read everything again
			passes.Phase = math.Round(float64(pass.UnixNano()) / 1e9)
			phase = result.Phase{Source: result.PhaseInferred, Uncertainty: u + time.Second}
		} else if stateDir != "" {
			problems = append(problems, "decay pass phase unknown: usage may be off by one PriorityCalcPeriod: "+err.Error())
		}
	}
	if phase.Source != result.PhaseUnknown && passes.Period > 0 {
		phase.Last = time.Unix(int64(passes.LastPass(float64(at.UnixNano())/1e9)), 0)
	}
	ref.Cluster, ref.Passes, ref.Since, ref.Location = c, passes, since, time.Local
	if local {
		ref.Boot = e.boot
	}
	snap, err := ref.Refresh(ctx, at)
	if err != nil {
		return nil, err
	}
	for _, p := range snap.Problems {
		problems = append(problems, p.Error())
	}
	tree, err := fairshare.NewTree(snap.Tree.Assocs)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	in := &Inputs{
		Name:          name,
		Settings:      settings(conf),
		Tree:          tree,
		TieOrderKnown: local && !e.boot.IsZero(),
		Boot:          ref.Boot,
		Passes:        passes,
		Phase:         phase,
		TRES:          map[string][]float64{},
		Maui:          e.Maui,
		Computed:      at,
		Tolerance:     e.Tolerance,
	}
	for id, v := range snap.TRES {
		if id == slurmdbd.TRESBilling {
			continue // the billing usage itself
		}
		n := snap.TRESNames[id]
		if n == "" {
			n = fmt.Sprintf("tres_%d", id)
			problems = append(problems, fmt.Sprintf("usage rows of id_tres=%d, which tres_table does not list: exported as tres=%q", id, n))
		}
		in.TRES[n] = v
	}
	e.warnChanged(name, problems)
	in.Uncharged, in.Running, in.TailRisk = snap.Uncharged, snap.Running, snap.TailRisk
	if snap.LastRan.OK {
		in.LastRollup = time.Unix(snap.LastRan.Hourly, 0)
	}
	ids := make([]uint32, len(snap.Tree.Row))
	for i, r := range snap.Tree.Row {
		ids[i] = snap.Rows[r].ID
	}
	in.assocIDs, in.tresNames, in.qos = ids, snap.TRESNames, snap.QOS
	if conf.PriorityWeightAssoc > 0 {
		rowPrio := slurmdbd.InheritedPriority(snap.Rows)
		in.assocPriority = make([]uint32, len(ids))
		for i, r := range snap.Tree.Row {
			in.assocPriority[i] = rowPrio[r]
		}
	}
	return in, nil
}

// warnChanged logs each of a cluster's data problems when it first
// appears: a bad row stays bad at every refresh, and logging it every
// minute buried everything else.
func (e *Exporter) warnChanged(cluster string, problems []string) {
	if e.warned == nil {
		e.warned = map[string]map[string]bool{}
	}
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		if !e.warned[cluster][p] {
			e.Log.Warn().Str("slurm_cluster", cluster).Msg(p)
		}
		seen[p] = true
	}
	if len(problems) > 0 {
		e.Log.Debug().Str("slurm_cluster", cluster).Int("problems", len(problems)).Msg("data problems left out of this refresh (each warned once)")
	}
	e.warned[cluster] = seen
}

// extras reads what the per-association factors do not need: pending jobs
// for their priorities and the ticket-based active set, usage windows for
// Maui (again only after a new hourly rollup).
func (e *Exporter) extras(ctx context.Context, c slurmdbd.Cluster, cs *clusterState, in *Inputs) error {
	prio, rows, err := e.pendingJobs(ctx, c, in)
	if err != nil {
		return err
	}
	in.Priorities = prio
	if !e.WhatIf {
		return nil
	}
	pending := map[uint32]bool{}
	for _, r := range rows {
		pending[r.Assoc] = true
	}
	in.Pending = make([]bool, len(in.assocIDs))
	for i, id := range in.assocIDs {
		in.Pending[i] = pending[id]
	}
	if e.MauiInterval <= 0 {
		return nil
	}
	rollup := in.LastRollup.Unix()
	if cs.maui == nil || cs.mauiRollup != rollup || len(cs.maui) != len(in.assocIDs) {
		windows, err := c.WindowUsage(ctx, in.Computed, e.MauiInterval, e.Maui.Depth)
		if err != nil {
			return err
		}
		cs.maui, cs.mauiRollup = mauiUsage(in.Tree, in.assocIDs, windows, e.Maui), rollup
	}
	in.MauiUsage = cs.maui
	return nil
}

// forecastInputs reads what the recovery forecast assumes of the future:
// the jobs running at in.Computed, each until its time limit, and every
// association's own usage rate over the last ForecastWindow of rolled-up
// hours (the hours after the last rollup are not in the tables yet).
// Jobs and usage of associations outside the tree (removed users) are
// left out.
func (e *Exporter) forecastInputs(ctx context.Context, c slurmdbd.Cluster, in *Inputs) error {
	index := make(map[uint32]int, len(in.assocIDs))
	for i, id := range in.assocIDs {
		index[id] = i
	}
	jobs, problems, err := c.RunningJobs(ctx, in.Computed)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		e.Log.Warn().Err(problems[0]).Int("jobs", len(problems)).Msg("running jobs left out of the forecast")
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
	in.ForecastRate = make([]float64, len(in.assocIDs))
	in.ForecastWindow = e.ForecastWindow
	if in.LastRollup.IsZero() {
		return nil
	}
	used, err := c.BillingUsage(ctx, in.LastRollup.Add(-e.ForecastWindow), in.LastRollup)
	if err != nil {
		return err
	}
	for id, v := range used {
		if i, ok := index[id]; ok {
			in.ForecastRate[i] += v / e.ForecastWindow.Seconds()
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
	passes = fairshare.Passes{HalfLife: conf.PriorityDecayHalfLife.Seconds(), Period: conf.PriorityCalcPeriod.Seconds(), ChargeJobEnd: conf.EnforceLimits(), LockWait: conf.LockHold().Seconds()}
	ran, reset, err := slurmstate.LastDecayRan(stateDir)
	if err != nil {
		return passes, since, err
	}
	passes.Phase = float64(ran.Unix())
	if conf.PriorityUsageResetPeriod != "NONE" {
		since = reset
	}
	return passes, since, nil
}

func settings(conf *slurmconf.Config) Settings {
	return Settings{
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

// Once reads one cluster at at as a refresh does, from nothing saved:
// the one-shot path of check and explain (Build makes the rest of it). It
// asks BootTime, if set, for slurmctld's boot, opens the database and
// closes it again.
func (e *Exporter) Once(ctx context.Context, name string, at time.Time) (*Inputs, error) {
	e.Log = e.Log.Level(max(e.Log.GetLevel(), zerolog.WarnLevel))
	defer e.closeDB()
	if e.BootTime != nil && name == e.Conf.ClusterName {
		boot, err := e.BootTime(ctx)
		if err != nil {
			e.Log.Warn().Err(err).Msg("slurmctld boot time unknown: tied Fair Tree siblings may rank in another order")
		}
		e.boot = boot
	}
	var ref slurmdbd.Refresher
	in, err := e.read(ctx, name, &ref, at)
	if err != nil {
		return nil, err
	}
	if err := e.extras(ctx, ref.Cluster, &clusterState{}, in); err != nil {
		e.Log.Warn().Err(err).Msg("pending jobs or Maui windows")
	}
	if e.ForecastWindow > 0 {
		if err := e.forecastInputs(ctx, ref.Cluster, in); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// publish builds every cluster from its last good computation and the
// fresh report, and hands the snapshot to the collector.
func (e *Exporter) publish() {
	t0 := e.now()
	snap := &result.Snapshot{Sources: maps.Clone(e.sources), ClusterUp: maps.Clone(e.clusterUp), Published: t0}
	rep := e.freshReport()
	if e.Report != nil && e.reportStale() {
		s := snap.Sources["reported"]
		s.Up = false
		snap.Sources["reported"] = s
	}
	names := slices.Sorted(maps.Keys(e.clusters))
	var buildErr error
	for _, name := range names {
		cs := e.clusters[name]
		if cs.last == nil {
			continue
		}
		in := *cs.last
		in.Memo, in.Recovery = &cs.memo, cs.recovery
		if name == e.Conf.ClusterName && rep != nil && cs.reportFor.Equal(rep.At) {
			in.Report = rep
			rep.DB, rep.Pass, rep.Phase = cs.reportDB, cs.reportPass, cs.reportPhase
		}
		cl, err := Build(&in)
		if err != nil {
			buildErr = err
			e.Log.Error().Err(err).Str("slurm_cluster", name).Msg("comparing with what Slurm reports")
			in.Report = nil
			cl, _ = Build(&in)
		}
		cl.Jobs = nil // explain's detail: the metrics hold the groups
		snap.Clusters = append(snap.Clusters, cl)
	}
	e.stage(StageBuild, e.now().Sub(t0), buildErr)
	t1 := e.now()
	snap.Stages = maps.Clone(e.stages)
	err := e.Collector.Publish(snap)
	e.stage(StagePublish, e.now().Sub(t1), err)
	if err != nil {
		e.Log.Error().Err(err).Msg("rendering the metrics")
	} else if snap.Sources["db"].Up {
		e.ready.Store(true)
	}
	if e.dropped == nil {
		e.dropped = map[string]int{}
	}
	for _, cl := range snap.Clusters {
		if cl.Dropped > e.dropped[cl.Name] {
			e.Log.Warn().Str("slurm_cluster", cl.Name).Int("dropped", cl.Dropped).Msg("too many associations to export: some left out (--collector.max-associations)")
		}
		e.dropped[cl.Name] = cl.Dropped
	}
}
