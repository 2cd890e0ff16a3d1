package cli

import (
	"context"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sim"
)

// DemoAssociations is the default size of the demo cluster (serve --demo,
// explain --demo: sim/).
const DemoAssociations = 400

// SimSource is the demo's simulated cluster as the engine's source (sim
// does not import engine: its Cluster method returns its own type).
func SimSource(c *sim.Cluster) engine.Source { return simSource{c} }

type simSource struct{ c *sim.Cluster }

func (s simSource) Clusters(ctx context.Context) ([]string, error) { return s.c.Clusters(ctx) }
func (s simSource) Close() error                                   { return s.c.Close() }

func (s simSource) Cluster(ctx context.Context, name string) (engine.ClusterSource, error) {
	c, err := s.c.Cluster(ctx, name)
	if err != nil {
		return nil, err
	}
	return c, nil
}
