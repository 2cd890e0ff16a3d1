package engine

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
)

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
