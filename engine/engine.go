// Package engine reads a cluster at a moment, from the slurmdbd database
// or the demo's simulation, into build.Inputs (Refresh), and keeps what
// makes the next read incremental; Tracker reads what slurmctld reports
// across its decay passes. What is published is computed by package
// build, from plain data; the database handle stays here.
package engine

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

// Engine computes clusters' fairshare inputs from the slurmdbd database:
// the one pipeline behind serve, check and explain. It keeps each
// cluster's incremental state (frozen usage sums, saved usage, Maui
// windows) from one Refresh to the next, so that serve's loop refreshes in
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
