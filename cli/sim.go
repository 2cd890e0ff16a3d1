package cli

import "github.com/slurmdbd-exporter/slurmdbd_exporter/sim"

// DemoAssociations is the default size of the demo cluster (serve --demo,
// explain --demo: sim/).
const DemoAssociations = 400

// Sim is the demo cluster serve --demo serves and explain --demo
// explains: the same history and seed, so that both show one cluster.
func (d *DemoFlags) Sim() sim.Config {
	return sim.Config{Associations: d.DemoAssociations, Speed: 1, History: sim.History, Seed: 1}
}
