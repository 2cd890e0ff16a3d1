package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// siteSoak is the soak on the site-shaped cluster: serve with its default
// flags on the cluster's database, slurm.conf and state directory,
// scraped every siteScrapeEvery as a Prometheus server would, and a
// Prometheus evaluating the shipped rules on it (fastRules: every `for:`
// in seconds, so an alert that a healthy cluster would raise in an hour
// shows here).
type siteSoak struct {
	s     *served
	prom  *promServer
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	scrapes int
	down    int      // scrapes with a source not up (slurmctld restarting)
	beyond  []string // scrapes with associations beyond tolerance
}

// siteScrapeEvery is a common Prometheus scrape interval.
const siteScrapeEvery = 15 * time.Second

func startSiteSoak(t *testing.T, c *slurmharness.Cluster, db []string) *siteSoak {
	t.Helper()
	k := &siteSoak{s: startServe(t, c.Env(), db...), start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	k.prom = startPrometheus(t, strings.TrimPrefix(k.s.url, "http://"))
	up := func(src string) string { return series("slurmdbd_exporter_up", "source", src) }
	k.s.waitScrape("serve: both sources up", 2*time.Minute, func(m map[string]float64) bool { return m[up("db")] == 1 && m[up("reported")] == 1 })
	go func() {
		defer close(k.done)
		tick := time.NewTicker(siteScrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-tick.C:
			}
			m, _, err := k.s.tryScrape()
			k.mu.Lock()
			k.scrapes++
			switch {
			case err != nil || m[up("db")] != 1 || m[up("reported")] != 1:
				k.down++
			default:
				if f, u, which := driftBeyond(m, c.Name); f+u > 0 {
					k.beyond = append(k.beyond, fmt.Sprintf("%s: %v; largest drifts %v", time.Now().Format(time.TimeOnly), which, maxDrift(m, c.Name)))
				}
			}
			k.mu.Unlock()
		}
	}()
	return k
}

// alerts fails t if Prometheus saw any alert, pending or firing, since the
// soak began.
func (k *siteSoak) alerts(t *testing.T, what string) {
	t.Helper()
	waitEvaluated(t, k.prom)
	seen := k.prom.alertsSince(k.start)
	t.Logf("soak until %s: Prometheus saw alerts %v since %s", what, seen, k.start.Format(time.TimeOnly))
	if len(seen) > 0 {
		t.Errorf("healthy site-shaped cluster, until %s: Prometheus saw alerts %v", what, seen)
	}
}

// end stops scraping and fails t if any scrape had an association beyond
// tolerance.
func (k *siteSoak) end(t *testing.T) {
	t.Helper()
	close(k.stop)
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	t.Logf("soak: %d scrapes every %v over %v, %d with a source down, %d with associations beyond tolerance",
		k.scrapes, siteScrapeEvery, time.Since(k.start).Round(time.Second), k.down, len(k.beyond))
	for _, b := range k.beyond {
		t.Errorf("healthy site-shaped cluster: beyond tolerance at %s", b)
	}
	if k.scrapes-k.down < 20 {
		t.Errorf("soak: %d scrapes with both sources up, want 20 or more", k.scrapes-k.down)
	}
}
