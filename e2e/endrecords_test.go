package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// TestEndRecordDelay measures how long after a job's end its record is in
// job_table (make end-records; docs/serve.md): what the database can lack
// of the ends slurmctld has charged under AccountingStorageEnforce=limits,
// and so the unrecorded_ends part of the drift bound. It polls job_table
// every 100 ms while jobs end, in four phases, on each of
// $SLURMDBD_EXPORTER_RELEASES side by side: a steady churn of jobs; a
// burst of a hundred ending together; slurmctld stopped for 20 s while
// jobs end; slurmdbd stopped for 20 s while jobs end. A delay is the poll
// that first saw the end less the recorded end (whole seconds, so up to a
// second more than the truth).
func TestEndRecordDelay(t *testing.T) {
	for _, release := range liveReleases() {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			endRecordDelay(t, release)
		})
	}
}

func endRecordDelay(t *testing.T, release string) {
	c := slurmharness.Start(t, slurmharness.Config{Release: release, CPUs: 1024, Enforce: "associations,limits"})
	loadTwoAccounts(c)
	w := newEndWatch(t, c)
	defer w.stop()
	submit := func(n, secs int) {
		for range n {
			if _, err := c.Run("sbatch", "--uid=alice", "-A", "phys", "-n", "8", "--chdir=/tmp", "-o", "/dev/null", fmt.Sprintf("--wrap=sleep %d", secs)); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase := func(name string, run func()) {
		w.phase(name)
		run()
		time.Sleep(15 * time.Second) // the last ends recorded
	}
	phase("steady", func() {
		for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Duration(1+rand.IntN(3)) * time.Second) {
			submit(1, 1+rand.IntN(15))
		}
	})
	phase("burst", func() {
		c.MustRun("sbatch", "--uid=alice", "-A", "phys", "-n", "8", "--array=1-100", "--chdir=/tmp", "-o", "/dev/null", "--wrap=sleep 20")
		time.Sleep(30 * time.Second)
	})
	for _, daemon := range []string{"slurmctld", "slurmdbd"} {
		phase(daemon+" stopped", func() {
			submit(10, 8)
			time.Sleep(4 * time.Second)
			c.StopDaemon(daemon)
			time.Sleep(20 * time.Second)
			c.StartDaemon(daemon)
			time.Sleep(10 * time.Second)
		})
	}
	for _, p := range w.report() {
		t.Logf("end records: %s: %s", release, p)
	}
}

// endWatch polls job_table for new ends, by phase.
type endWatch struct {
	c       *slurmharness.Cluster
	db      *sql.DB
	mu      sync.Mutex
	seen    map[uint64]bool
	cur     string
	order   []string
	delays  map[string][]time.Duration
	done    chan struct{}
	stopped sync.WaitGroup
}

func newEndWatch(t *testing.T, c *slurmharness.Cluster) *endWatch {
	db, err := sql.Open("mysql", c.DB.DSN("root", "", "slurm_acct_db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := &endWatch{c: c, db: db, seen: map[uint64]bool{}, delays: map[string][]time.Duration{}, done: make(chan struct{})}
	w.stopped.Add(1)
	go func() {
		defer w.stopped.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(100 * time.Millisecond):
				w.poll()
			}
		}
	}()
	return w
}

func (w *endWatch) poll() {
	rows, err := w.db.Query(fmt.Sprintf("SELECT job_db_inx, time_end FROM `%s_job_table` WHERE time_end > 0", w.c.Name))
	now := time.Now()
	if err != nil {
		return // the next poll
	}
	defer rows.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for rows.Next() {
		var inx uint64
		var end int64
		if rows.Scan(&inx, &end) != nil || w.seen[inx] {
			continue
		}
		w.seen[inx] = true
		if w.cur != "" {
			w.delays[w.cur] = append(w.delays[w.cur], now.Sub(time.Unix(end, 0)))
		}
	}
}

func (w *endWatch) phase(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur = name
	w.order = append(w.order, name)
}

func (w *endWatch) stop() {
	close(w.done)
	w.stopped.Wait()
}

// report is a line per phase: how many ends, and their delays' median,
// 99th percentile and largest.
func (w *endWatch) report() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, p := range w.order {
		d := slices.Clone(w.delays[p])
		slices.Sort(d)
		if len(d) == 0 {
			out = append(out, p+": no end recorded")
			continue
		}
		q := func(f float64) time.Duration { return d[int(f*float64(len(d)-1))].Round(100 * time.Millisecond) }
		out = append(out, fmt.Sprintf("%s: %d ends, delay median %v, p99 %v, largest %v", p, len(d), q(0.5), q(0.99), d[len(d)-1].Round(100*time.Millisecond)))
	}
	return out
}
