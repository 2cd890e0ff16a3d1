// Package serve is serve's schedule: it refreshes every cluster from the
// engine, reads what slurmctld reports through the engine's Tracker, and
// publishes a snapshot after each. It talks to the engine through the
// engine's methods; what it keeps between publishes is its own.
package serve

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

// Publisher serves what a refresh computed.
type Publisher interface {
	Publish(*result.Snapshot) error
}

// Schedule is how often serve's Loop does what.
type Schedule struct {
	// Interval is how often the database is read.
	Interval time.Duration
	// StaleAfter withdraws a report this old.
	StaleAfter time.Duration
	// ForecastWindow reads what the recovery forecast assumes (0: off):
	// the running jobs and each association's usage rate over this much
	// rolled-up time (Inputs.Forecast). RecoveryInterval computes the
	// recovery metric (Inputs.ComputeRecovery) at most this often (0:
	// off); the last good one is served in between, with its moment.
	ForecastWindow, RecoveryInterval time.Duration
}

// Loop is serve's: it refreshes every cluster from the engine on its
// schedule, reads what slurmctld reports through the engine's Tracker,
// and publishes a snapshot after each; scrapes never wait for it.
type Loop struct {
	e   *engine.Engine
	pub Publisher
	s   Schedule

	sources map[string]result.Source
	served  map[string]*served
	// clusterUp: whether each cluster's last refresh succeeded
	clusterUp map[string]bool
	report    *engine.Reading // the last good one (nil: none)
	// settingsAt is when slurm.conf's priority settings last changed
	settingsAt time.Time
	ready      atomic.Bool
	// dropped: associations the series budget left out of each cluster
	// at the last publish (warned when it grows)
	dropped map[string]int
	// recoveries hands the recovery metric's computations back to Run's
	// loop (nil: computed in the refresh)
	recoveries chan recoveryResult
	// losses are the usage losses the reports showed (UsageLosses)
	losses result.Losses
	// kept is the pass phase last saved (Engine.KeepPasses)
	kept engine.PassMemory
}

// served is what the loop keeps of a cluster between publishes.
type served struct {
	last *build.Inputs // the last good computation
	memo build.BuildMemo
	// the database's tree at the moment of the last report, and what is
	// known of the pass it stands at
	reportDB    *fairshare.Tree
	reportTies  bool // reportDB is in slurmctld's order
	reportFor   time.Time
	reportPass  drift.PassError
	reportPhase result.Phase
	reportMemo  *build.ReportMemo
	recovery    *result.Recovery
	// recovering: a computation of the recovery metric is under way
	recovering bool
	// refreshTook is the last refresh's cost (database and extras), and
	// recoveryTook the last recovery computation's: recoveryEvery
	refreshTook, recoveryTook time.Duration
}

// NewLoop is serve's loop over e, publishing to pub.
func NewLoop(e *engine.Engine, pub Publisher, s Schedule) *Loop {
	l := &Loop{e: e, pub: pub, s: s, sources: map[string]result.Source{"db": {}}, served: map[string]*served{},
		clusterUp: map[string]bool{}, dropped: map[string]int{}}
	if e.Tracker() != nil {
		l.sources["reported"] = result.Source{}
	}
	l.losses.Counts = map[string]int{}
	for _, k := range result.LossKinds {
		l.losses.Counts[k] = 0
	}
	return l
}

// Ready reports whether the computation of a good database refresh has
// been published.
func (l *Loop) Ready() bool { return l.ready.Load() }

// Run refreshes until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	reports := make(chan *engine.Reading)
	l.recoveries = make(chan recoveryResult)
	defer l.e.Close()
	tick := time.NewTicker(l.s.Interval)
	defer tick.Stop()
	stale := time.NewTimer(time.Hour)
	stale.Stop()
	l.refreshAll(ctx, l.e.Clock().Now())
	l.publish()
	if t := l.e.Tracker(); t != nil {
		l.e.RecallPasses()
		// After the first refresh: a report is only compared with the
		// database, and at 100k associations sshare and a cold load
		// would share the cores (and slurmctld the head node's).
		go l.readReports(ctx, t, reports)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.refreshAll(ctx, l.e.Clock().Now())
		case r := <-reports:
			l.onReport(ctx, r)
			if l.report != nil {
				stale.Reset(l.e.Clock().Until(l.report.At.Add(l.s.StaleAfter)) + time.Second)
			}
		case <-stale.C:
		case r := <-l.recoveries:
			l.recovered(r)
		}
		l.publish()
	}
}

// readReports reads the reported side when the tracker says, each read
// bounded by its timeout.
func (l *Loop) readReports(ctx context.Context, t *engine.Tracker, out chan<- *engine.Reading) {
	for {
		r := t.Read(ctx)
		if r.BootErr != nil {
			l.e.Log().Warn().Err(r.BootErr).Msg("slurmctld boot time unknown: tied Fair Tree siblings are compared by rank range")
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(l.e.Clock().Until(t.Next(r))):
		case <-ctx.Done():
			return
		}
	}
}

func (l *Loop) source(name string, ok bool, at time.Time) {
	s := l.sources[name]
	s.Up = ok
	if ok {
		s.LastSuccess = at
	}
	l.sources[name] = s
}

func (l *Loop) onReport(ctx context.Context, r *engine.Reading) {
	if ctx.Err() != nil {
		return // shutting down: a read cut short is no failure of the source
	}
	l.e.RecordStage(result.StageReported, r.Took, r.Err)
	if r.Err == nil && !l.e.WaitRecorded(ctx, r.End) {
		return
	}
	if r.Err != nil {
		l.e.Log().Error().Err(r.Err).Msg("reading what Slurm reports")
		l.source("reported", false, time.Time{})
		return
	}
	l.e.SawBoot(r.Boot)
	r.Out.FillMissingFactor(float64(l.e.Conf().FairShareDampeningFactor))
	l.lost(r)
	l.report = r
	l.source("reported", true, l.e.Wall()) // wall time: a health timestamp, whatever the clock
	l.e.ForgetPasses()
	if m, ok := l.e.Tracker().Memory(); ok && m != l.kept {
		l.e.KeepPasses(m)
		l.kept = m
	}
	// compare with the database's usage at the moment of the report:
	// usage moves at every decay pass
	sv := l.served[l.e.Conf().ClusterName]
	in, err := l.e.RefreshAtReport(ctx, r.At)
	if err != nil && ctx.Err() == nil {
		l.e.Log().Error().Err(err).Msg("refresh from the database at the moment of the report")
	}
	if in == nil || sv == nil {
		return
	}
	read := &[2]time.Time{r.Start, r.End}
	if n, after := in.ShownAfter(*read, r.Pass, r.PassGap); after {
		if !in.Computed.After(n.After()) {
			if in, err = l.e.RefreshAtReport(ctx, n.After()); in == nil {
				if err != nil && ctx.Err() == nil {
					l.e.Log().Error().Err(err).Msg("refresh from the database just after the pass the report followed")
				}
				return
			}
		}
		read = nil
	}
	pass, phase := in.AtReport(read)
	sv.reportDB, sv.reportTies, sv.reportFor, sv.reportPass, sv.reportMemo = in.Tree, in.TieOrderKnown, r.At, pass, &build.ReportMemo{}
	sv.reportPhase = phase
}

// lost counts and logs the usage losses read r shows against the last
// good read.
func (l *Loop) lost(r *engine.Reading) {
	conf := l.e.Conf()
	ls := engine.UsageLosses(l.report, r, conf.Passes().D(), conf.PriorityCalcPeriod, conf.ResetsUsage())
	for _, x := range ls {
		l.e.Log().Warn().Str("slurm_cluster", conf.ClusterName).Str("account", x.Account).Str("user", x.User).Str("partition", x.Partition).
			Str("kind", x.Kind).Float64("before", x.Before).Float64("after", x.After).
			Msg("RawUsage fell by more than decay explains: usage lost in slurmctld (RawUsage reset, or state restored from an older checkpoint)")
	}
	addLosses(&l.losses, ls)
}

// reportStale: there is no report, or it is too old to serve.
func (l *Loop) reportStale() bool {
	return l.report == nil || l.e.Clock().Now().Sub(l.report.At) > l.s.StaleAfter
}

// freshReport is the report if it is recent enough to compare.
func (l *Loop) freshReport() *build.Reported {
	r := l.report
	if l.reportStale() || r.At.Before(l.settingsAt) {
		return nil
	}
	period := l.e.Conf().PriorityCalcPeriod
	rep := &build.Reported{Out: r.Out, At: r.At, Settling: r.Settling, PassRaw: r.PassRaw(period), PassGap: r.PassGap}
	if ref := r.LagReference(period); ref != nil {
		rep.PrevRaw = ref.Raw
	}
	return rep
}

func (l *Loop) refreshAll(ctx context.Context, at time.Time) {
	if l.e.ReloadConf() {
		// a report read under the old settings is not compared with the
		// new: slurmctld may have taken them up since (a restart; from
		// 23.11 scontrol reconfigure is one)
		l.settingsAt = l.e.Clock().Now()
	}
	l.e.Tracker().SetConf(l.e.Conf())
	t0 := l.e.Wall()
	names, err := l.e.Clusters(ctx)
	if ctx.Err() != nil {
		return // shutting down: reads cut short are no failure of the database
	}
	l.e.RecordStage(result.StageConnect, l.e.Wall().Sub(t0), err)
	if err != nil {
		l.e.Log().Error().Err(err).Msg("database")
		l.source("db", false, time.Time{})
		return
	}
	ok := true
	for _, name := range names {
		err := l.refreshCluster(ctx, name, at)
		if ctx.Err() != nil {
			return
		}
		l.clusterUp[name] = err == nil
		if errors.Is(err, slurmdbd.ErrNoTables) {
			// cluster_up says so; the other clusters are the database's
			// health
			l.e.WarnOnce(name, err)
			continue
		}
		if err != nil {
			l.e.Log().Error().Err(err).Str("slurm_cluster", name).Msg("refresh from the database")
		}
		ok = ok && err == nil
	}
	for name := range l.served {
		if !slices.Contains(names, name) {
			delete(l.served, name) // removed from cluster_table
			l.e.Forget(name)
			delete(l.clusterUp, name)
		}
	}
	l.source("db", ok, l.e.Wall())
}

// refreshCluster rebuilds one cluster at at; on failure the last good
// computation stays.
func (l *Loop) refreshCluster(ctx context.Context, name string, at time.Time) error {
	sv := l.served[name]
	if sv == nil {
		sv = &served{}
		l.served[name] = sv
	}
	t0 := l.e.Wall()
	in, err := l.e.Refresh(ctx, name, at)
	if err != nil {
		return err
	}
	sv.refreshTook = l.e.Wall().Sub(t0)
	l.recover(ctx, sv, in)
	sv.last = in
	return nil
}

// RecoveryBudget is the most the recovery metric may cost, amortized over
// the refreshes between two computations, as a share of a steady refresh.
const RecoveryBudget = 0.2

// recoveryEvery is how often the recovery metric is computed: every
// RecoveryInterval, or less often when its last computation cost more
// than RecoveryBudget of the refreshes in between (under Fair Tree, users
// whose runs break at many job ends: docs/performance.md).
func (l *Loop) recoveryEvery(sv *served) time.Duration {
	every := l.s.RecoveryInterval
	if sv.refreshTook > 0 && l.s.Interval > 0 {
		refreshes := float64(sv.recoveryTook) / (RecoveryBudget * float64(sv.refreshTook))
		every = max(every, time.Duration(refreshes*float64(l.s.Interval)))
	}
	return every
}

// recover starts the recovery metric's computation when the last is
// recoveryEvery old and none is under way: its inputs are read here,
// the forecast of every user runs off the refresh loop (at 100k
// associations under Fair Tree it takes seconds, docs/performance.md)
// and comes back through l.recoveries (recovered). Without Run's loop
// (a test calling refreshAll) it runs here.
func (l *Loop) recover(ctx context.Context, sv *served, in *build.Inputs) {
	if l.s.RecoveryInterval <= 0 || l.s.ForecastWindow <= 0 || sv.recovering {
		return
	}
	if r := sv.recovery; r != nil && in.Computed.Sub(r.Computed) < l.recoveryEvery(sv) {
		return
	}
	t0 := l.e.Wall()
	if err := l.e.ForecastInputs(ctx, in, l.s.ForecastWindow); err != nil {
		l.recovered(recoveryResult{name: in.Name, took: l.e.Wall().Sub(t0), err: err})
		return
	}
	read := l.e.Wall().Sub(t0)
	c := *in // the loop's next refresh makes new inputs: this one stays as it is
	compute := func() recoveryResult {
		t1 := time.Now()
		r, err := c.ComputeRecovery()
		return recoveryResult{name: c.Name, r: r, err: err, took: read + time.Since(t1)}
	}
	if l.recoveries == nil {
		l.recovered(compute())
		return
	}
	sv.recovering = true
	go func() {
		r := compute()
		select {
		case l.recoveries <- r:
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
func (l *Loop) recovered(r recoveryResult) {
	l.e.RecordStage(result.StageForecast, r.took, r.err)
	sv := l.served[r.name]
	if sv != nil {
		sv.recovering, sv.recoveryTook = false, r.took
	}
	if r.err != nil {
		l.e.Log().Warn().Err(r.err).Str("slurm_cluster", r.name).Msg("recovery forecast: serving the last one")
		return
	}
	if sv != nil {
		sv.recovery = r.r
	}
}

// publish builds every cluster from its last good computation and the
// fresh report, and hands the snapshot to the publisher.
func (l *Loop) publish() {
	t0 := l.e.Wall()
	snap := &result.Snapshot{Sources: maps.Clone(l.sources), ClusterUp: maps.Clone(l.clusterUp), Published: t0}
	rep := l.freshReport()
	if _, ok := snap.Sources["reported"]; ok && l.reportStale() {
		s := snap.Sources["reported"]
		s.Up = false
		snap.Sources["reported"] = s
	}
	var buildErr error
	for _, name := range slices.Sorted(maps.Keys(l.served)) {
		sv := l.served[name]
		if sv.last == nil {
			continue
		}
		in := *sv.last
		in.Memo, in.Recovery = &sv.memo, sv.recovery
		if name == l.e.Conf().ClusterName && l.e.Tracker() != nil {
			in.Losses = &result.Losses{Counts: maps.Clone(l.losses.Counts), Last: slices.Clone(l.losses.Last)}
		}
		if name == l.e.Conf().ClusterName && rep != nil && sv.reportFor.Equal(rep.At) {
			in.Reported = rep
			rep.DB, rep.DBTieOrderKnown, rep.Pass, rep.Phase, rep.Memo = sv.reportDB, sv.reportTies, sv.reportPass, sv.reportPhase, sv.reportMemo
		}
		cl, err := build.Build(&in)
		if err != nil {
			buildErr = err
			l.e.Log().Error().Err(err).Str("slurm_cluster", name).Msg("comparing with what Slurm reports")
			in.Reported = nil
			cl, _ = build.Build(&in)
		}
		snap.Clusters = append(snap.Clusters, cl)
	}
	l.e.RecordStage(result.StageBuild, l.e.Wall().Sub(t0), buildErr)
	t1 := l.e.Wall()
	snap.Stages = l.e.Stages()
	err := l.pub.Publish(snap)
	l.e.RecordStage(result.StagePublish, l.e.Wall().Sub(t1), err)
	if err != nil {
		l.e.Log().Error().Err(err).Msg("rendering the metrics")
	} else if snap.Sources["db"].Up {
		l.ready.Store(true)
	}
	for _, cl := range snap.Clusters {
		if cl.Dropped > l.dropped[cl.Name] {
			l.e.Log().Warn().Str("slurm_cluster", cl.Name).Int("dropped", cl.Dropped).Msg("too many associations to export: some left out (--collector.max-associations)")
		}
		l.dropped[cl.Name] = cl.Dropped
	}
}
