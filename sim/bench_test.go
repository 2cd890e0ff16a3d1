package sim

import (
	"testing"
	"time"
)

// BenchmarkNew11k: the demo's start at 11,112 associations (serve --demo
// --demo.associations 11112, as the load test runs it): 14 days of jobs,
// passes and rollups simulated.
func BenchmarkNew11k(b *testing.B) {
	for b.Loop() {
		if _, err := New(Config{Associations: 11112, Speed: 1, History: History, Start: time.Unix(1_800_000_000, 0)}); err != nil {
			b.Fatal(err)
		}
	}
}
