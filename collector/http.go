package collector

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// encoded is a snapshot's exposition, rendered when it is published and
// kept gzipped only (scrapers ask for gzip; at 100k associations the text
// is some 100 MB): a 10k-association cluster is some 100k series, too many
// to render within a scrape's time budget, and they only change with the
// snapshot. The association series, nearly all of them, change only at
// slurmctld's decay passes: digest tells when they are the same as the
// last snapshot's, whose rendering is then kept.
type encoded struct {
	digest        uint64
	assocs, other []byte // gzip members
}

// Publish makes s what scrapes serve and renders its exposition. s must
// not change afterwards.
func (c *Collector) Publish(s *Snapshot) error {
	digest := assocDigest(s, c.Extended)
	prev := c.enc.Load()
	e := &encoded{digest: digest}
	if prev != nil && prev.digest == digest {
		e.assocs = prev.assocs
	} else {
		e.assocs = renderGzip(func(out sink) { collectAssociations(s, c.Extended, out) })
	}
	e.other = renderGzip(func(out sink) { collectStatic(s, out) })
	c.snap.Store(s)
	c.enc.Store(e)
	return nil
}

// Live is the half of the metrics that changes with the time of the
// scrape (ages); it belongs in the registry given to Handler.
func (c *Collector) Live() prometheus.Collector { return live{c} }

type live struct{ c *Collector }

func (live) Describe(chan<- *prometheus.Desc) {}
func (l live) Collect(ch chan<- prometheus.Metric) {
	if s := l.c.snap.Load(); s != nil {
		collectLive(s, l.c.now(), toChan(ch))
	}
}

// Handler serves /metrics in the text format: the published snapshot as
// rendered at publish time, followed by what g gathers at scrape time
// (Live, Go and process metrics). Gzip responses concatenate two gzip
// members, which RFC 1952 allows and Prometheus reads.
func (c *Collector) Handler(g prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := g.Gather()
		if err != nil {
			http.Error(w, "gathering the exporter's own metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		var liveText bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&liveText, mf); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		e := c.enc.Load()
		if e == nil {
			e = &encoded{}
		}
		h := w.Header()
		h.Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		if !acceptsGzip(r) {
			if len(e.assocs)+len(e.other) > 0 {
				zr, err := gzip.NewReader(io.MultiReader(bytes.NewReader(e.assocs), bytes.NewReader(e.other)))
				if err == nil {
					io.Copy(w, zr)
				}
			}
			w.Write(liveText.Bytes())
			return
		}
		h.Set("Content-Encoding", "gzip")
		w.Write(e.assocs)
		w.Write(e.other)
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(w)
		zw.Write(liveText.Bytes())
		zw.Close()
		gzipWriters.Put(zw)
	})
}

// gzipWriters are reused across scrapes: a new gzip.Writer allocates
// about a megabyte of compressor state, more than the live metrics it
// compresses.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
