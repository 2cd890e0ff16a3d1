package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// watch is serve with its default flags on a live cluster's database,
// slurm.conf and state directory, scraped every scrapeEvery as a
// Prometheus server would, and a Prometheus evaluating the shipped rules
// on it (fastRules: every `for:` in seconds, so an alert that a healthy
// cluster would raise in an hour shows here): the soak of the site-shaped
// cluster and of an upgrade.
type watch struct {
	s     *served
	prom  *promServer
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	scrapes int
	down    int      // scrapes with a source not up (slurmctld restarting)
	beyond  []string // scrapes with associations beyond tolerance
	// dbDown is the longest run of scrapes with the database down, losses
	// the usage losses serve counted at the last scrape
	dbDown, dbDownRun int
	losses            float64
}

// scrapeEvery is a common Prometheus scrape interval.
const scrapeEvery = 15 * time.Second

func startWatch(t *testing.T, c *slurmharness.Cluster, db []string) *watch {
	t.Helper()
	k := &watch{s: startServe(t, c.Env(), db...), start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	k.prom = startPrometheus(t, strings.TrimPrefix(k.s.url, "http://"))
	up := func(src string) string { return series("slurmdbd_exporter_up", "source", src) }
	k.s.waitScrape("serve: both sources up", 2*time.Minute, func(m map[string]float64) bool { return m[up("db")] == 1 && m[up("reported")] == 1 })
	go func() {
		defer close(k.done)
		tick := time.NewTicker(scrapeEvery)
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
			k.dbDownRun++
			if err == nil && m[up("db")] == 1 {
				k.dbDownRun = 0
			}
			k.dbDown = max(k.dbDown, k.dbDownRun)
			if err == nil {
				k.losses = 0
				for _, v := range prefixed(m, "slurmdbd_fairshare_usage_losses_total{") {
					k.losses += v
				}
			}
			switch {
			case err != nil || m[up("db")] != 1 || m[up("reported")] != 1:
				k.down++
			default:
				if f, u, which := driftBeyond(m, c.Name); f+u > 0 {
					k.beyond = append(k.beyond, fmt.Sprintf("%s: %v; largest drifts %v; bounds %v; phase %v, last pass %v; computed and reported %v",
						time.Now().Format(time.TimeOnly), which, maxDrift(m, c.Name), driftBounds(m, c.Name),
						nonZero(m, c.Name, "slurmdbd_fairshare_decay_phase_uncertainty_seconds"), nonZero(m, c.Name, "slurmdbd_fairshare_decay_last_pass_timestamp_seconds"), usagePairs(m, c.Name)))
				}
			}
			k.mu.Unlock()
		}
	}()
	return k
}

// alerts fails t if Prometheus saw any alert, pending or firing, since the
// watch began, but those allowed (by name).
func (k *watch) alerts(t *testing.T, what string, allowed ...string) {
	t.Helper()
	waitEvaluated(t, k.prom)
	seen := k.prom.alertsSince(k.start)
	t.Logf("watched until %s: Prometheus saw alerts %v since %s", what, seen, k.start.Format(time.TimeOnly))
	for _, a := range seen {
		if name, _, _ := strings.Cut(a, "{"); !slices.Contains(allowed, name) {
			t.Errorf("healthy cluster, until %s: Prometheus saw alert %s", what, a)
		}
	}
}

// end stops scraping and fails t if any scrape had an association beyond
// tolerance.
func (k *watch) end(t *testing.T) {
	t.Helper()
	close(k.stop)
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	t.Logf("watch: %d scrapes every %v over %v, %d with a source down (the database at most %d in a row), %d with associations beyond tolerance, %v usage losses counted",
		k.scrapes, scrapeEvery, time.Since(k.start).Round(time.Second), k.down, k.dbDown, len(k.beyond), k.losses)
	for _, b := range k.beyond {
		t.Errorf("healthy cluster: beyond tolerance at %s", b)
	}
	if k.losses != 0 {
		t.Errorf("healthy cluster: serve counted %v usage losses", k.losses)
	}
	if k.scrapes-k.down < 20 {
		t.Errorf("soak: %d scrapes with both sources up, want 20 or more", k.scrapes-k.down)
	}
}
