package engine

import (
	"context"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/sim"
)

// WithSim computes for the demo's simulated cluster c: its slurmdbd
// tables are the source, its clock, running at speed, gives the moments.
func WithSim(c *sim.Cluster, speed float64) Option {
	return func(o *options) { o.source, o.clock = simSource{c}, Clock{Now: c.Now, Speed: speed} }
}

// simSource is c as a Source: sim does not import engine, so its Cluster
// method returns its own type.
type simSource struct{ c *sim.Cluster }

func (s simSource) Clusters(ctx context.Context) ([]string, error) { return s.c.Clusters(ctx) }
func (s simSource) Close() error                                   { return s.c.Close() }

func (s simSource) Cluster(ctx context.Context, name string) (ClusterSource, error) {
	c, err := s.c.Cluster(ctx, name)
	if err != nil {
		return nil, err
	}
	return c, nil
}
