// Package collector turns the exporter's refreshed results into Prometheus
// metrics. A scrape reads the last published snapshot and never touches
// the database or slurmctld.
package collector
