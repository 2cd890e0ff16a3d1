package e2e

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
)

// passJitter is engine.passJitter: how far a decay pass may fall from the
// schedule of its slurmctld's boot.
const passJitter = time.Second

// TestPassSchedule measures how far slurmctld's decay passes fall from
// the schedule of their boot, which the drift bounds take the tails of
// finished jobs to follow (engine.passJitter, issue 30). _decay_thread
// (priority_multifactor.c) sleeps to absolute deadlines, one
// PriorityCalcPeriod apart from the thread's start (abs.tv_sec +=
// priority_calc_period), and takes a pass's moment from time(NULL) when
// it wakes: a whole second, one later where the start's fraction and
// the wake-up's latency add up past it. The job lock a pass waits for
// comes after that moment. For $SLURMDBD_EXPORTER_PASS_WATCH (default
// 30m) on each of liveReleases side by side, while jobs start and end
// every few seconds, it reads priority_last_decay_ran every 200 ms and
// takes each new pass's offset from the first pass's schedule; it fails
// on an offset beyond passJitter, or on a pass missed, and logs how the
// offsets fall (docs/serve.md#pass-schedule; make passes).
func TestPassSchedule(t *testing.T) {
	watch := 30 * time.Minute
	if s := os.Getenv("SLURMDBD_EXPORTER_PASS_WATCH"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 3*time.Minute {
			t.Fatalf("SLURMDBD_EXPORTER_PASS_WATCH=%q: expected a duration of 3m or more", s)
		}
		watch = d
	}
	for _, release := range liveReleases() {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			passSchedule(t, release, watch)
		})
	}
}

func passSchedule(t *testing.T, release string, watch time.Duration) {
	c := slurmharness.Start(t, slurmharness.Config{Release: release, CPUs: 1024})
	loadTwoAccounts(c)
	period := c.CalcPeriod()
	done := make(chan struct{})
	submitted := make(chan int)
	go func() { submitted <- churn(c, done) }()
	var first, last time.Time
	offsets := map[time.Duration]int{}
	passes, worst := 0, time.Duration(0)
	deadline := time.Now().Add(watch)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		ran, _, err := slurmstate.LastDecayRan(c.StateDir())
		if err != nil || !ran.After(last) {
			continue // not written yet, or no new pass
		}
		if first.IsZero() {
			// the thread's first pass runs at its start, the schedule's
			// own start
			first, last = ran, ran
			continue
		}
		k := (ran.Sub(first) + period/2) / period
		if gap := ran.Sub(last); passes > 0 && gap > period+passJitter+period/2 {
			t.Errorf("%s: passes at %s and %s: %v apart, a pass missed", release, last.Format(time.TimeOnly), ran.Format(time.TimeOnly), gap)
		}
		off := ran.Sub(first) - k*period
		offsets[off]++
		worst = max(worst, off.Abs())
		last = ran
		passes++
	}
	close(done)
	jobs := <-submitted
	var dist []string
	for _, off := range slices.Sorted(maps.Keys(offsets)) {
		dist = append(dist, fmt.Sprintf("%+v: %d", off, offsets[off]))
	}
	t.Logf("passes: %s: %d passes over %v while %d jobs started and ended, offsets from the first one's schedule: %s; largest %v",
		release, passes, watch, jobs, strings.Join(dist, ", "), worst)
	if jobs < int(watch/(10*time.Second)) {
		t.Errorf("%s: %d jobs submitted in %v: expected one every few seconds, the load the passes are measured under", release, jobs, watch)
	}
	if passes < int(watch/period)-3 {
		t.Errorf("%s: %d passes seen in %v: expected one every %v", release, passes, watch, period)
	}
	if worst > passJitter {
		t.Errorf("%s: a pass %v off its boot's schedule: more than passJitter (%v)", release, worst, passJitter)
	}
}

// churn keeps jobs starting and ending every few seconds until done, and
// returns how many it submitted: what takes slurmctld's job lock, which a
// pass waits for.
func churn(c *slurmharness.Cluster, done <-chan struct{}) (submitted int) {
	users := [][2]string{{"alice", "phys"}, {"bob", "phys"}, {"carol", "chem"}}
	for {
		select {
		case <-done:
			return submitted
		case <-time.After(time.Duration(2+rand.IntN(4)) * time.Second):
		}
		u := users[rand.IntN(len(users))]
		// a failed submission is counted out, not fatal: the test
		// judges how many went in
		if _, err := c.Run("sbatch", "--uid="+u[0], "-A", u[1], "-n", fmt.Sprint(8*(1+rand.IntN(16))), "--chdir=/tmp", "-o", "/dev/null",
			fmt.Sprintf("--wrap=sleep %d", 1+rand.IntN(20))); err == nil {
			submitted++
		}
	}
}
