package slurmharness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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

// JobStates maps job id to state for every job slurmctld still lists.
func (c *Cluster) JobStates() map[string]string {
	c.t.Helper()
	out := c.MustRun("squeue", "-h", "-o", "%i %T")
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

// WaitRunning waits until every job is running.
func (c *Cluster) WaitRunning(d time.Duration, ids ...string) {
	c.t.Helper()
	c.waitFor("jobs to run", d, func() error {
		st := c.JobStates()
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
		st := c.JobStates()
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
// the one that ends is in practice one that began after the call.
func (c *Cluster) WaitDecayPass() {
	c.t.Helper()
	prev := c.LastDecayRan()
	c.waitFor("a decay pass", 150*time.Second, func() error {
		if cur := c.LastDecayRan(); len(cur) == 0 || bytes.Equal(cur, prev) {
			return fmt.Errorf("priority_last_decay_ran unchanged")
		}
		return nil
	})
}

// Sshare runs sshare with the arguments.
func (c *Cluster) Sshare(args ...string) string {
	c.t.Helper()
	return c.MustRun("sshare", args...)
}

// StateDir is slurmctld's StateSaveLocation.
func (c *Cluster) StateDir() string { return filepath.Join(c.Dir, "state") }
