package engine

import (
	"maps"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
)

// What serve's loop asks of the engine it runs: the engine's state is
// its own, and the loop reads and changes it through these alone.

// Conf is slurm.conf's settings as last read (ReloadConf).
func (e *Engine) Conf() *slurmconf.Config { return e.conf }

// Log is where the engine logs.
func (e *Engine) Log() *zerolog.Logger { return &e.o.log }

// Clock gives the moments the engine computes for (WithClock).
func (e *Engine) Clock() Clock { return e.o.clock }

// Wall is the wall clock's now, for durations and health timestamps,
// whatever Clock gives (WithWall).
func (e *Engine) Wall() time.Time { return e.now() }

// Tracker is the reads of what slurmctld reports (WithTracker; nil:
// none).
func (e *Engine) Tracker() *Tracker { return e.o.tracker }

// Stages are the stages' last runs, a copy.
func (e *Engine) Stages() map[string]result.Stage { return maps.Clone(e.stages) }

// SawBoot records slurmctld's boot as a read of it learned it (zero:
// unknown, the boot last learned stays).
func (e *Engine) SawBoot(boot time.Time) {
	if !boot.IsZero() {
		e.boot = boot
	}
}

// Forget drops what the engine kept of a cluster (removed from
// cluster_table).
func (e *Engine) Forget(cluster string) { delete(e.clusters, cluster) }

// WarnOnce logs a cluster's data problem err when it first appears, as
// a refresh's own (warnChanged).
func (e *Engine) WarnOnce(cluster string, err error) {
	e.warnChanged(cluster, []problem{problemOf(err)})
}

// WithWall is the wall clock for durations and health timestamps
// (default time.Now).
func WithWall(now func() time.Time) Option { return func(o *options) { o.wall = now } }
