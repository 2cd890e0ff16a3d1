package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/exporter-toolkit/web"
)

// ServeConfig is where and how Serve serves the metrics.
type ServeConfig struct {
	// Web is the listen addresses, systemd socket and TLS/basic auth
	// configuration (exporter-toolkit).
	Web     *web.FlagConfig
	Version string
	// Ready answers /-/ready: whether a good refresh has been published.
	Ready func() bool
	Log   *slog.Logger
}

// Serve serves the metrics at /metrics, with the Go and process
// collectors, /-/healthy, /-/ready and a landing page, until ctx ends.
func (c *Collector) Serve(ctx context.Context, cfg ServeConfig) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", c.Handler(ownRegistry()))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy.") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !cfg.Ready() {
			http.Error(w, "Not ready: no successful refresh from the database yet.", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Ready.")
	})
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "slurmdbd_exporter",
		Description: "Slurm fairshare recomputed from the slurmdbd database, with its drift from what Slurm reports",
		Version:     cfg.Version,
		Links: []web.LandingLinks{
			{Address: "metrics", Text: "Metrics"},
			{Address: "-/healthy", Text: "Health"},
			{Address: "-/ready", Text: "Readiness"},
		},
	})
	if err != nil {
		return err
	}
	mux.Handle("/", landing)
	srv := newServer(mux)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err = web.ListenAndServe(srv, cfg.Web, cfg.Log)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// buildInfoProgram names slurmdbd_exporter_build_info, the metric every
// Prometheus exporter exports (mysqld_exporter, node_exporter): value 1,
// labelled by prometheus/common/version's variables as the build set them.
const buildInfoProgram = "slurmdbd_exporter"

func buildInfo() prometheus.Collector { return version.NewCollector(buildInfoProgram) }

// ownRegistry is the exporter's own metrics beside the snapshot's: Go's,
// the process's and build_info, gathered at scrape time (see ownGzip).
func ownRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	return reg
}

// newServer bounds what a client may hold: a request's headers must come
// within 10 s, and an idle keep-alive connection is closed after 5
// minutes (Prometheus keeps its own between scrapes, at intervals up to a
// few minutes).
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
}
