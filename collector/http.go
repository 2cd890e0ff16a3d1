package collector

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
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

// Publish makes s what scrapes serve and renders its exposition, with each
// cluster's associations cut to the series budget (Filter: Assocs and
// Dropped are set on s). s must not change afterwards.
func (c *Collector) Publish(s *result.Snapshot) error {
	for i := range s.Clusters {
		cl := &s.Clusters[i]
		cl.Assocs, cl.Dropped = c.Filter.Apply(cl.Assocs)
	}
	prev := c.enc.Load()
	if prev == nil {
		prev = &encoded{}
	}
	var e *encoded
	if prev.assocs != nil && sameAssocs(c.snap.Load(), s) {
		e = &encoded{digest: prev.digest, assocs: prev.assocs}
	} else {
		e = &encoded{digest: assocDigest(s, c.Extended)}
		if prev.assocs != nil && prev.digest == e.digest {
			e.assocs = prev.assocs
		} else {
			e.assocs = renderGzip(keptGzip, len(prev.assocs), func(out sink) { collectAssociations(s, c.Extended, out) })
		}
	}
	e.other = renderGzip(keptGzip, len(prev.other), func(out sink) { collectStatic(s, out) })
	c.snap.Store(s)
	c.enc.Store(e)
	return nil
}

// ownEvery is how long the exporter's own Go and process metrics are
// served from one gathering.
const ownEvery = time.Second

// own is the exporter's Go and process metrics, gathered and gzipped.
type own struct {
	mu  sync.Mutex
	at  time.Time
	gz  []byte
	err error
}

// ownGzip gathers g at most once per ownEvery: under many concurrent
// scrapes, reading /proc for each (the process collector reads
// /proc/self/net/netstat too) and compressing its text again would be a
// large part of a scrape's CPU; a scrape every 15 s or more sees each
// gathering once.
func (c *Collector) ownGzip(g prometheus.Gatherer) ([]byte, error) {
	o := &c.own
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := c.now(); o.gz == nil || now.Sub(o.at) >= ownEvery || now.Before(o.at) {
		o.at, o.gz, o.err = now, nil, nil
		mfs, err := g.Gather()
		if err != nil {
			o.err = fmt.Errorf("gathering the exporter's own metrics: %w", err)
			return nil, o.err
		}
		o.gz = scrapeGzip.gzipped(0, func(zw io.Writer) {
			for _, mf := range mfs {
				if _, err := expfmt.MetricFamilyToText(zw, mf); err != nil {
					o.err = err
				}
			}
		})
	}
	return o.gz, o.err
}

// Handler serves /metrics in the text format: the published snapshot as
// rendered at publish time, the ages as of the scrape, and g's metrics
// (the exporter's Go and process metrics, see ownGzip). Gzip responses
// concatenate gzip members, which RFC 1952 allows and Prometheus reads.
func (c *Collector) Handler(g prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ownGz, err := c.ownGzip(g)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var liveGz []byte
		if s := c.snap.Load(); s != nil {
			now := c.now()
			liveGz = renderGzip(scrapeGzip, 0, func(out sink) { collectLive(s, now, out) })
		}
		e := c.enc.Load()
		if e == nil {
			e = &encoded{}
		}
		members := [][]byte{e.assocs, e.other, liveGz, ownGz}
		size := 0
		for _, m := range members {
			size += len(m)
		}
		h := w.Header()
		h.Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		if !acceptsGzip(r) {
			readers := make([]io.Reader, 0, len(members))
			for _, m := range members {
				readers = append(readers, bytes.NewReader(m))
			}
			if size > 0 {
				if zr, err := gzip.NewReader(io.MultiReader(readers...)); err == nil {
					io.Copy(w, zr)
				}
			}
			return
		}
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", strconv.Itoa(size))
		for _, m := range members {
			w.Write(m)
		}
	})
}

// gzipPool reuses gzip writers of one level: a new gzip.Writer allocates
// about a megabyte of compressor state, more than the live metrics it
// compresses.
type gzipPool struct{ sync.Pool }

func newGzipPool(level int) *gzipPool {
	return &gzipPool{sync.Pool{New: func() any {
		zw, _ := gzip.NewWriterLevel(io.Discard, level)
		return zw
	}}}
}

var (
	// keptGzip compresses what publish renders once and every scrape
	// sends, whose bytes are most of a scrape's cost under concurrent
	// scrapers: level 2 is 12% smaller than BestSpeed in the same time;
	// level 4 takes 40% longer for 6% less (docs/performance.md).
	keptGzip = newGzipPool(2)
	// scrapeGzip compresses what each scrape renders, which is small: a
	// level-2 writer's Reset alone clears 640 KB of hash tables.
	scrapeGzip = newGzipPool(gzip.BestSpeed)
)

// gzipped is what write writes, as one gzip member; about is how long the
// last one was (0: unknown). Grown by doubling instead, the 16 MB of a
// 100k-association rendering would leave as much garbage.
func (p *gzipPool) gzipped(about int, write func(io.Writer)) []byte {
	var gz bytes.Buffer
	gz.Grow(about + about/8)
	zw := p.Get().(*gzip.Writer)
	zw.Reset(&gz)
	write(zw)
	zw.Close()
	p.Put(zw)
	return gz.Bytes()
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
