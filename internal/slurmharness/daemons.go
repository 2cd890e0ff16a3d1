package slurmharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// startDaemons starts the cluster's MariaDB, munged (or finds the
// host's), slurmdbd, slurmctld and slurmd, and waits until the node is
// idle.
func (c *Cluster) startDaemons() {
	t := c.t
	t.Helper()
	// MariaDB first: t.Cleanup runs last-in first-out, so it stops after
	// the Slurm daemons.
	c.DB = mariadbtest.Start(t, c.Dir)
	t.Cleanup(c.teardown)
	c.startMunge()
	// The database first: slurmdbd 24.11 and later creating it hit a TLS
	// error and retried 5 s later.
	if _, err := c.SQL("CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';" +
		" GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'"); err != nil {
		t.Fatalf("creating the slurm database user: %v", err)
	}
	c.writeConfigs()
	c.StartDaemon("slurmdbd")
	c.waitDbd(60 * time.Second)
	c.Sacctmgr("add", "cluster", c.Name)
	c.startCtld()
	for _, d := range c.slurmds() {
		c.StartDaemon(d)
	}
	c.waitFor("the nodes to be idle", 90*time.Second, func() error {
		// a line per node and partition
		out, err := c.Run("sinfo", "-h", "-N", "-o", "%N %T")
		states := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if node, st, ok := strings.Cut(l, " "); ok {
				states[node] = st
			}
		}
		for _, st := range states {
			if err == nil && !strings.HasPrefix(st, "idle") {
				err = fmt.Errorf("node states %v", states)
			}
		}
		if err == nil && len(states) != c.cfg.Nodes {
			err = fmt.Errorf("nodes %v, want %d", states, c.cfg.Nodes)
		}
		return err
	})
}

// startMunge starts the host's munged unless a credential round trip
// already works; every cluster on the host shares it, as on a real head
// node. A chroot release's cluster has one of its own.
func (c *Cluster) startMunge() {
	if c.root != "" {
		c.startChrootMunge()
		return
	}
	// clusters start side by side: one of them starts the host's munged
	hostMunge.Lock()
	defer hostMunge.Unlock()
	if mungeWorks() {
		return
	}
	for _, cmd := range [][]string{
		{"mkdir", "-p", "/run/munge"},
		{"chown", "munge:munge", "/run/munge"},
		{"runuser", "-u", "munge", "--", "/usr/sbin/munged"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			c.t.Fatalf("starting munged: %s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	}
	c.waitFor("munged to answer", 30*time.Second, func() error {
		if !mungeWorks() {
			return errors.New("munge -n | unmunge fails")
		}
		return nil
	})
}

var hostMunge sync.Mutex

func mungeWorks() bool {
	return exec.Command("sh", "-c", "munge -n | unmunge").Run() == nil
}

// StartDaemon starts slurmdbd, slurmctld or slurmd (n1's; slurmd-n2 and
// on: the further nodes', Config.Nodes) in the foreground as a child of
// the test.
func (c *Cluster) StartDaemon(name string) {
	var args []string
	switch name {
	case "slurmdbd":
		args = []string{"-D"}
	case "slurmctld":
		args = []string{"-D"}
	case "slurmd":
		args = []string{"-D", "-N", "n1"}
	default:
		// slurmd-n2 and on: the further nodes' slurmd (Config.Nodes)
		if node, ok := strings.CutPrefix(name, "slurmd-"); ok {
			c.spawn(name, c.command(context.Background(), "slurmd", "-D", "-N", node))
			return
		}
		c.t.Fatalf("unknown daemon %q", name)
	}
	c.spawn(name, c.command(context.Background(), name, args...))
}

func (c *Cluster) spawn(name string, cmd *exec.Cmd) {
	logf, err := os.OpenFile(filepath.Join(c.Dir, name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a test killed by its timeout takes its daemons along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	go func() { cmd.Wait(); logf.Close() }()
	c.mu.Lock()
	c.procs[name] = cmd
	c.mu.Unlock()
}

// StopDaemon stops one daemon and waits for it to exit: SIGTERM, then
// SIGKILL after stopGrace. It reports whether it had to kill it.
func (c *Cluster) StopDaemon(name string) (killed bool) {
	c.mu.Lock()
	cmd := c.procs[name]
	delete(c.procs, name)
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return false
	}
	t0 := time.Now()
	killed = stop(cmd)
	if took := time.Since(t0); killed || took > 5*time.Second {
		c.t.Logf("%s took %v to stop (killed: %v)", name, took.Round(time.Millisecond), killed)
	}
	return killed
}

// stopGrace is how long a daemon has to exit after SIGTERM. slurmctld
// saves its state (assoc_usage among it) on the way out and otherwise
// only every 5 minutes (PERIODIC_CHECKPOINT): killed, it comes back with
// up to 5 minutes of usage lost. On a loaded machine its shutdown has
// taken over 20 s (a CI run's "state kept" restart lost 26% of everyone's
// usage), so the grace is generous.
const stopGrace = 2 * time.Minute

func stop(cmd *exec.Cmd) (killed bool) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) {
		if syscall.Kill(cmd.Process.Pid, 0) != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return true
}

// RestartCtld stops slurmctld, sets PriorityFlags (a real restart, not
// scontrol reconfigure, which leaves wrong factors), starts it again and
// waits until it answers. Running jobs survive, and so does slurmctld's
// state when it saved it on the way out: it reports whether it did.
// A restart that had to kill slurmctld fails the test. One that found a
// lock held is real Slurm (see savedState) and is the caller's to judge.
func (c *Cluster) RestartCtld(priorityFlags string) (saved bool) {
	log := filepath.Join(c.Dir, "slurmctld.log")
	var from int64
	if fi, err := os.Stat(log); err == nil {
		from = fi.Size()
	}
	if c.StopDaemon("slurmctld") {
		c.t.Errorf("slurmctld did not exit within %v of SIGTERM: killed, its state since its last checkpoint is lost", stopGrace)
	}
	saved = c.savedState(log, from)
	c.SetPriorityFlags(priorityFlags)
	c.startCtld()
	return saved
}

// KillCtld kills slurmctld with SIGKILL, as a crash or the OOM killer
// would, waits until it is gone, starts it again and waits until it
// answers. Killed, it saves nothing on the way out: it comes back from
// its last periodic checkpoint (PERIODIC_CHECKPOINT, every 5 minutes) of
// assoc_usage, the usage charged since lost. Its jobs run on under
// slurmd and slurmstepd, which are not in its process group.
func (c *Cluster) KillCtld() {
	c.t.Helper()
	c.mu.Lock()
	cmd := c.procs["slurmctld"]
	delete(c.procs, "slurmctld")
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		c.t.Fatal("KillCtld: slurmctld is not running")
	}
	// its group: slurmscriptd, its child, goes with it
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	c.waitFor("slurmctld to die of SIGKILL", 30*time.Second, func() error {
		// spawn's goroutine reaps it; until then it is a zombie
		if syscall.Kill(cmd.Process.Pid, 0) == nil {
			return fmt.Errorf("pid %d still there", cmd.Process.Pid)
		}
		return nil
	})
	c.startCtld()
}

// savedState reads what slurmctld logged from offset from on while it
// shut down. It saves its state (assoc_usage among it) on the way out only
// if no slurmctld lock is held at that moment (controller.c,
// _slurmctld_background: report_locks_set), else it logs "can not save
// state" and its next start loads the last periodic checkpoint, up to 5
// minutes old (PERIODIC_CHECKPOINT): every release does this, and a
// loaded machine makes it likelier.
func (c *Cluster) savedState(log string, from int64) bool {
	f, err := os.Open(log)
	if err != nil {
		c.t.Fatalf("reading slurmctld's log: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<30))
	if err != nil {
		c.t.Fatalf("reading slurmctld's log: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "Locks left set") || strings.Contains(strings.ToLower(l), "can not save state") {
			c.t.Logf("slurmctld did not save its state on the way out: %s", l)
		}
	}
	return bytes.Contains(b, []byte("Saving all slurm state"))
}

// slurmds are the names of the cluster's slurmd daemons (StartDaemon):
// n1's, then the further nodes' (Config.Nodes).
func (c *Cluster) slurmds() []string {
	names := []string{"slurmd"}
	for i := 2; i <= c.cfg.Nodes; i++ {
		names = append(names, fmt.Sprintf("slurmd-n%d", i))
	}
	return names
}

// waitDbd waits, for at most d, until slurmdbd answers sacctmgr (having
// created or converted the database first).
func (c *Cluster) waitDbd(d time.Duration) {
	c.t.Helper()
	c.waitFor("slurmdbd to answer", d, func() error {
		_, err := c.Run("sacctmgr", "-n", "-P", "show", "cluster")
		return err
	})
}

// startCtld starts slurmctld and waits until it answers.
func (c *Cluster) startCtld() {
	c.StartDaemon("slurmctld")
	wait := c.cfg.CtldWait
	if wait <= 0 {
		wait = time.Minute
	}
	c.waitFor("slurmctld to answer", wait, func() error {
		out, err := c.Run("scontrol", "ping")
		if err == nil && !strings.Contains(out, "UP") {
			err = errors.New(out)
		}
		return err
	})
}
func (c *Cluster) teardown() {
	if c.t.Failed() {
		for _, f := range []string{"slurmctld.log", "slurmdbd.log", "slurmd.log", "slurmrestd.out", "slurmrestd-local.out"} {
			if b, err := os.ReadFile(filepath.Join(c.Dir, f)); err == nil {
				c.t.Logf("--- %s (tail)\n%s", f, testenv.Tail(b))
			}
		}
	}
	if _, ok := c.procs["slurmctld"]; ok {
		_, _ = c.Run("scancel", "--full", "-M", c.Name, "-u", "*")
		for _, u := range c.users() {
			_, _ = c.Run("scancel", "-u", u)
		}
		c.waitJobsGone(30 * time.Second)
	}
	daemons := append([]string{"slurmrestd", "slurmrestd-local"}, c.slurmds()...)
	for _, name := range append(daemons, "slurmctld", "slurmdbd", "munged") {
		c.StopDaemon(name)
	}
	if !c.t.Failed() || testenv.CI() {
		os.RemoveAll(c.Dir)
	} else {
		c.t.Logf("kept %s for inspection", c.Dir)
	}
}

func (c *Cluster) users() []string {
	out, err := c.Run("squeue", "-h", "-o", "%u")
	if err != nil {
		return nil
	}
	return strings.Fields(out)
}

func (c *Cluster) waitJobsGone(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		out, err := c.Run("squeue", "-h", "-o", "%i")
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(time.Second)
	}
}
