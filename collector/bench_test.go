package collector_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
)

// bigSnapshot is a Fair Tree cluster of n associations with usage in four
// TRES, what-if views and a fresh report: every metric family filled.
func bigSnapshot(b *testing.B, n int) *result.Snapshot {
	tree := fairshare.Synthetic(n, 5, 11)
	now := time.Now()
	in := &build.Inputs{Name: "big", Settings: build.Settings{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1}, Database: build.Database{Tree: tree, TRES: map[string][]float64{}, Pending: make([]bool, tree.Len()), MauiUsage: make([]float64, tree.Len()), Uncharged: make([]float64, tree.Len()), Computed: now, LastRollup: now.Truncate(time.Hour)}, Options: build.Options{Maui: fairshare.MauiConfig{Depth: 8, Decay: 1}, Tolerance: drift.DefaultTolerance}}
	for _, name := range []string{"cpu", "mem", "node", "gres/gpu"} {
		v := make([]float64, tree.Len())
		for i := range v {
			v[i] = tree.Association(i).RawUsage
		}
		in.TRES[name] = v
	}
	in.Reported = &build.Reported{Out: shares.Of(tree, tree.FairTree()), At: now}
	cl, err := build.Build(in)
	if err != nil {
		b.Fatal(err)
	}
	return &result.Snapshot{Clusters: []result.Cluster{cl}, Published: now,
		Sources: map[string]result.Source{"db": {Up: true, LastSuccess: now}, "reported": {Up: true, LastSuccess: now}}}
}

// BenchmarkScrape10k serves /metrics over HTTP, gzip as Prometheus asks,
// for a 10k-association cluster, and reports the 99th percentile.
func BenchmarkScrape10k(b *testing.B) {
	col := collector.New()
	col.Extended = true // every family: the most a scrape can cost
	snap := bigSnapshot(b, 10000)
	t0 := time.Now()
	if err := col.Publish(snap); err != nil {
		b.Fatal(err)
	}
	publish := time.Since(t0)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := httptest.NewServer(col.Handler(reg))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	var lat []time.Duration
	var size int64
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		size, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(size)/1e6, "gzip-MB")
	b.ReportMetric(float64(len(snap.Clusters[0].Assocs)), "assocs")
	b.ReportMetric(float64(publish.Milliseconds()), "publish-ms")
}

// BenchmarkPublish100k renders the demo cluster's exposition at 100,000
// associations, as after a decay pass (every association series anew):
// its time and, with -benchmem, the garbage it makes, which sets the
// exporter's peak RSS at that size.
func BenchmarkPublish100k(b *testing.B) {
	snap := buildtest.Demo(time.Now(), 100000)
	b.ReportAllocs()
	for b.Loop() {
		if err := collector.New().Publish(snap); err != nil {
			b.Fatal(err)
		}
	}
}
