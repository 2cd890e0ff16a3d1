package usage

import (
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// BenchmarkRebuildJobs is Rebuild's share of a steady refresh that comes
// from jobs: 10,000 running across the last rollup and 10,000 that ended
// in the re-read hours, on one user's association (the per-association
// sums are measured by slurmdbd's BenchmarkLoad).
func BenchmarkRebuildJobs(b *testing.B) {
	assocs, node := oneUser()
	const h = 500000 * 3600
	in := Inputs{Assocs: assocs, Node: node, Passes: fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 17}, At: h + 1200,
		LastHourly: h, Location: time.UTC}
	for i := range 10000 {
		in.Jobs = append(in.Jobs, Job{Inx: uint64(i), Assoc: 3, Start: h - int64(i%3600) - 1, TRESAlloc: "1=8,2=16000,5=8"})
		end := h - int64(i%(6*3600)) - 1
		in.Ended = append(in.Ended, Job{Inx: uint64(10000 + i), Assoc: 3, Start: end - 5000, End: end, TRESAlloc: "1=8,2=16000,5=8"})
	}
	b.ResetTimer()
	for b.Loop() {
		Rebuild(in)
	}
}

// BenchmarkRebuildSiteJobs is BenchmarkRebuildJobs with the jobs a site
// runs: billing priced as a fraction the record truncates, one in five
// under a QOS whose UsageFactor is not 1, ended jobs ten hours long; each
// adds to its rolled-up hours what their rows do not count (rowExcess).
func BenchmarkRebuildSiteJobs(b *testing.B) {
	assocs, node := oneUser()
	const h = 500000 * 3600
	in := Inputs{Assocs: assocs, Node: node, Passes: fairshare.Passes{HalfLife: 7 * 86400, Period: 300, Phase: 17}, At: h + 1200,
		LastHourly: h, Location: time.UTC, UsageFactor: map[uint32]float64{1: 1, 2: 2, 3: 0}}
	for i := range 10000 {
		qos := uint32(1 + i%5/3*(1+i%2))
		in.Jobs = append(in.Jobs, Job{Inx: uint64(i), Assoc: 3, QOS: qos, Start: h - int64(i%36000) - 1, TRESAlloc: "1=8,2=16000,5=11", Billed: 11.9, Priced: true})
		end := h - int64(i%(6*3600)) - 1
		in.Ended = append(in.Ended, Job{Inx: uint64(10000 + i), Assoc: 3, QOS: qos, Start: end - 36000, End: end, TRESAlloc: "1=8,2=16000,5=11", Billed: 11.9, Priced: true})
	}
	b.ResetTimer()
	for b.Loop() {
		Rebuild(in)
	}
}
