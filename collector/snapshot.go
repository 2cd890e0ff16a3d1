// Package collector turns the exporter's refreshed results into Prometheus
// metrics. A scrape reads the last published snapshot and never touches
// the database or slurmctld.
package collector

import (
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Association is one association's computed values, as of the refresh.
type Association struct {
	Account, User, Partition, Parent string
	Shares                           uint32
	// Usage is the rebuilt decayed usage: billing in Raw, then per TRES
	// name (cpu, mem, gres/gpu, ...).
	RawUsage  float64
	TRESUsage map[string]float64
	Classic   fairshare.Values
	FairTree  fairshare.Values
	// TicketBased and Maui are the what-if factors (NaN when not computed).
	TicketBased float64
	Maui        float64
	// ReportedFactor and ReportedUsage are what Slurm reports (NaN when
	// it reports nothing fresh).
	ReportedFactor float64
	ReportedUsage  float64
}

// Config is what the config_info metric says about a cluster.
type Config struct {
	PriorityFlags string
	HalfLife      time.Duration
	CalcPeriod    time.Duration
	Dampening     uint16
	ResetPeriod   string
}

// Cluster is everything published for one cluster.
type Cluster struct {
	Name string
	// Algorithm is what slurm.conf selects.
	Algorithm fairshare.Algorithm
	Config    Config
	Assocs    []Association
	// LastRollup is last_ran_table.hourly_rollup (zero before the first).
	LastRollup time.Time
	// Drift is the comparison with what Slurm reports, nil when no report
	// is fresh enough.
	Drift *drift.Report
}

// Source is the health of one source of data.
type Source struct {
	Up          bool
	LastSuccess time.Time
	Duration    time.Duration
	Errors      uint64 // failures since start
}

// Snapshot is what a scrape serves.
type Snapshot struct {
	Clusters []Cluster
	// Sources by name: "db", "reported".
	Sources map[string]Source
	// Refreshed is when the computation was published.
	Refreshed time.Time
}
