package slurmharness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnsureUnixUser creates a login-less local user for jobs, if missing (in
// a chroot release, in the chroot).
func (c *Cluster) EnsureUnixUser(name string) {
	c.t.Helper()
	if _, err := c.Run("id", "-u", name); err == nil {
		return
	}
	c.MustRun("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name)
}

// Submit starts a batch job of the given size that sleeps for seconds, as
// the user (sbatch --uid works for root), and returns its job id. extra
// are further sbatch options.
func (c *Cluster) Submit(user, account, partition string, cpus, seconds int, extra ...string) string {
	c.t.Helper()
	args := []string{"--parsable", "--uid=" + user, "-A", account, "-n", fmt.Sprint(cpus), "--chdir=/tmp", "-o", "/dev/null", "-J", user,
		fmt.Sprintf("--wrap=sleep %d", seconds)}
	if partition != "" {
		args = append(args, "-p", partition)
	}
	out := c.MustRun("sbatch", append(args, extra...)...)
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	return id
}

// WaitUsers waits until slurmctld lists each user under one of the
// accounts (sshare), at most 2 minutes: sacctmgr's additions reach it
// from slurmdbd a moment later, and a job submitted before is refused.
func (c *Cluster) WaitUsers(accounts []string, users ...string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("slurmctld to list users %v", users), 2*time.Minute, func() error {
		out, err := c.Run("sshare", "-n", "-P", "-a", "-A", strings.Join(accounts, ","), "-o", "User")
		if err != nil {
			return err
		}
		listed := strings.Fields(out)
		for _, u := range users {
			if !slices.Contains(listed, u) {
				return fmt.Errorf("%s not listed", u)
			}
		}
		return nil
	})
}

// JobStates maps job id to state for every job slurmctld still lists.
func (c *Cluster) JobStates() map[string]string {
	c.t.Helper()
	m, err := c.jobStates()
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// jobStates is JobStates that returns squeue's failure: under load squeue
// can time out ("Socket timed out on send/recv operation"), which a poll
// retries until its deadline.
func (c *Cluster) jobStates() (map[string]string, error) {
	out, err := c.Run("squeue", "-h", "-o", "%i %T")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m, nil
}

// WaitRunning waits until every job is running.
func (c *Cluster) WaitRunning(d time.Duration, ids ...string) {
	c.t.Helper()
	c.waitFor("jobs to run", d, func() error {
		st, err := c.jobStates()
		if err != nil {
			return err
		}
		for _, id := range ids {
			if st[id] != "RUNNING" {
				return fmt.Errorf("job %s is %q", id, st[id])
			}
		}
		return nil
	})
}

// WaitGone waits until slurmctld no longer lists the jobs (all of them
// when none are named).
func (c *Cluster) WaitGone(d time.Duration, ids ...string) {
	c.t.Helper()
	c.waitFor("jobs to end", d, func() error {
		st, err := c.jobStates()
		if err != nil {
			return err
		}
		if len(ids) == 0 && len(st) > 0 {
			return fmt.Errorf("%d jobs left", len(st))
		}
		for _, id := range ids {
			if s, ok := st[id]; ok {
				return fmt.Errorf("job %s is %s", id, s)
			}
		}
		return nil
	})
}

// LastDecayRan is the content of priority_last_decay_ran in
// StateSaveLocation (StateDir), which slurmctld rewrites at the end of
// every decay pass.
func (c *Cluster) LastDecayRan() []byte {
	b, _ := os.ReadFile(filepath.Join(c.StateDir(), "priority_last_decay_ran"))
	return b
}

// WaitDecayPass waits until slurmctld has finished a decay pass after the
// call: priority_last_decay_ran is rewritten. A pass takes milliseconds, so
// the one that ends is in practice one that began after the call. It
// returns at the first pass; the deadline, five periods, is only for a
// slurmctld that runs none.
func (c *Cluster) WaitDecayPass() {
	c.t.Helper()
	prev := c.LastDecayRan()
	c.waitFor("a decay pass", 5*c.CalcPeriod(), func() error {
		if cur := c.LastDecayRan(); len(cur) == 0 || bytes.Equal(cur, prev) {
			return fmt.Errorf("priority_last_decay_ran unchanged")
		}
		return nil
	})
}

// Checkpoint makes slurmctld save its state now, assoc_usage among it,
// rather than at its next periodic checkpoint (PERIODIC_CHECKPOINT, 300 s
// of its process), by scontrol reconfigure, and waits until assoc_usage is
// rewritten and slurmctld answers. 22.05 saves it in the same process as
// it rereads slurm.conf; from 23.11 the old process saves it before it
// hands over to a new one (a new boot time), which loads it. It returns
// the file's new modification time; the deadline is for a loaded machine.
func (c *Cluster) Checkpoint() time.Time {
	c.t.Helper()
	newProcess := c.cfg.Release != "" && c.cfg.Release != "22.05"
	boot0, saved0 := c.ShowConfig()["BOOT_TIME"], c.CheckpointTime()
	c.MustRun("scontrol", "reconfigure")
	var saved time.Time
	c.waitFor("scontrol reconfigure's checkpoint", 3*time.Minute, func() error {
		saved = c.CheckpointTime()
		switch boot := c.ShowConfig()["BOOT_TIME"]; {
		case saved.Equal(saved0):
			return fmt.Errorf("assoc_usage not rewritten since %v", saved0.Format(time.TimeOnly))
		case boot == "":
			return errors.New("slurmctld not answering")
		case newProcess && boot == boot0:
			return fmt.Errorf("slurmctld's boot time still %s", boot)
		}
		return nil
	})
	return saved
}

// CheckpointTime is when slurmctld last wrote assoc_usage (zero: never).
func (c *Cluster) CheckpointTime() time.Time {
	fi, err := os.Stat(filepath.Join(c.StateDir(), "assoc_usage"))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// ShowConfig is `scontrol show config` as its keys and values (nil when
// slurmctld does not answer). Values stay the text slurmctld printed: a
// test compares them, and the product's parsers (sshare.ParseBootTime)
// are a layer above the harness.
func (c *Cluster) ShowConfig() map[string]string {
	out, err := c.Run("scontrol", "show", "config")
	if err != nil {
		return nil
	}
	cfg := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			cfg[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return cfg
}

// HourlyRollup is slurmdbd's last_ran_table hourly_rollup: what it has
// rolled up to, or the time of a late record it rewound it to.
func (c *Cluster) HourlyRollup() (time.Time, error) {
	out, err := c.SQL(fmt.Sprintf("SELECT hourly_rollup FROM slurm_acct_db.`%s_last_ran_table`", c.Name))
	if err != nil {
		return time.Time{}, err
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("last_ran_table: %q: %w", out, err)
	}
	return time.Unix(sec, 0), nil
}

// WaitHourlyRollup waits until slurmdbd's own hourly rollup has rolled
// usage up to to (Config.HourAt puts a local hour there), within d.
func (c *Cluster) WaitHourlyRollup(to time.Time, d time.Duration) {
	c.t.Helper()
	c.waitFor("the hourly rollup to "+to.Format(time.TimeOnly), d, func() error {
		ran, err := c.HourlyRollup()
		if err == nil && ran.Before(to) {
			err = fmt.Errorf("last_ran %v", ran)
		}
		return err
	})
}

// Sshare runs sshare with the arguments.
func (c *Cluster) Sshare(args ...string) string {
	c.t.Helper()
	return c.MustRun("sshare", args...)
}

// StateDir is slurmctld's StateSaveLocation.
func (c *Cluster) StateDir() string { return filepath.Join(c.Dir, "state") }

// PidFile is slurmctld's pid file as the host sees it, for the exporter's
// --slurmctld.pid-file (slurm.conf's path is the daemons', inside a
// chroot release).
func (c *Cluster) PidFile() string { return filepath.Join(c.Dir, "slurmctld.pid") }
