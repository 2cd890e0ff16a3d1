package engine

import (
	"context"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

// Source is where the engine reads clusters' accounting: the slurmdbd
// database at New's DSN, or a cluster simulated in memory (serve --demo,
// WithSource), read through the same pipeline.
type Source interface {
	// Clusters are the clusters the source holds.
	Clusters(ctx context.Context) ([]string, error)
	// Cluster is one of them, for the per-cluster reads.
	Cluster(ctx context.Context, name string) (ClusterSource, error)
	Close() error
}

// ClusterSource is one cluster's accounting, as the engine reads it.
type ClusterSource interface {
	// Refresh rebuilds the tree and its usage at at as ref says
	// (Passes, Since, Boot, Location), from what ref kept of the last
	// refresh, if the source keeps anything.
	Refresh(ctx context.Context, ref *slurmdbd.Refresher, at time.Time) (*slurmdbd.Snapshot, error)
	// SnapshotAsCtld rebuilds usage at at from the whole history, the
	// associations in the order slurmctld started at boot keeps them.
	SnapshotAsCtld(ctx context.Context, at, boot time.Time, passes fairshare.Passes, since time.Time, loc *time.Location) (*slurmdbd.Snapshot, error)
	PendingJobs(ctx context.Context, at time.Time) ([]slurmdbd.PendingJob, error)
	ClusterTRES(ctx context.Context, at time.Time) (tres [][2]uint64, ok bool, err error)
	WindowUsage(ctx context.Context, end time.Time, w time.Duration, n int) (map[uint32][]float64, error)
	RunningJobs(ctx context.Context, at time.Time) ([]slurmdbd.RunningJob, []error, error)
	BillingUsage(ctx context.Context, from, to time.Time) (map[uint32]float64, error)
}

// WithSource reads src instead of the database at New's DSN.
func WithSource(src Source) Option { return func(o *options) { o.source = src } }

// Clock is the time the engine computes for: the wall clock, or a
// simulated cluster's, which may run Speed times faster. Durations it
// measures (a stage's cost) are wall time whatever the clock.
type Clock struct {
	Now   func() time.Time
	Speed float64
}

// WithClock computes for c's moments (default: the wall clock).
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

func (c Clock) orWall() Clock {
	if c.Now == nil || c.Speed <= 0 {
		return Clock{Now: time.Now, Speed: 1}
	}
	return c
}

// wait is how long the wall clock takes for d of c's time to pass.
func (c Clock) wait(d time.Duration) time.Duration { return time.Duration(float64(d) / c.Speed) }

// Until is how long the wall clock takes to reach c's moment t.
func (c Clock) Until(t time.Time) time.Duration { return c.wait(t.Sub(c.Now())) }

// dbSource is the slurmdbd database.
type dbSource struct {
	*slurmdbd.DB
	allTRES bool
}

func (d dbSource) Cluster(ctx context.Context, name string) (ClusterSource, error) {
	c, err := d.DB.Cluster(ctx, name)
	c.AllTRES = d.allTRES
	return dbCluster{c}, err
}

// dbCluster is one cluster of the database: its Refresher reads only
// what changed since the last refresh.
type dbCluster struct{ slurmdbd.Cluster }

func (c dbCluster) Refresh(ctx context.Context, ref *slurmdbd.Refresher, at time.Time) (*slurmdbd.Snapshot, error) {
	ref.Cluster = c.Cluster
	return ref.Refresh(ctx, at)
}
