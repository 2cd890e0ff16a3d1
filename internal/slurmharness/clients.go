package slurmharness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// SQL runs statements as root on the cluster's MariaDB.
func (c *Cluster) SQL(stmts string) (string, error) { return c.DB.SQL(stmts) }

// Env is the environment for Slurm clients of this cluster, the
// exporter among them: PATH starts with the cluster's bin directory, of
// wrappers that run each client in a chroot release's chroot, or links
// to the host release's clients (linkClients).
func (c *Cluster) Env() []string {
	env := append(os.Environ(), "SLURM_CONF="+c.Conf, "PATH="+c.binDir()+":"+os.Getenv("PATH"))
	if !c.cfg.HourAt.IsZero() {
		env = append(env, "TZ="+filepath.Join(c.Dir, zoneFile))
	}
	return env
}

// command runs a Slurm program for this cluster: on the host (from PATH,
// or the release's prefix), or inside the release's chroot.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if c.root != "" {
		return c.chrootCommand(ctx, "", name, args...)
	}
	cmd := exec.CommandContext(ctx, c.program(name), args...)
	cmd.Env = c.Env()
	return cmd
}

// Run runs a Slurm client against this cluster with a 60 s limit.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// MustRun is Run that fails the test on error.
func (c *Cluster) MustRun(name string, args ...string) string {
	c.t.Helper()
	out, err := c.Run(name, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// Version is the release the cluster's clients report (sinfo -V).
func (c *Cluster) Version() string { return strings.TrimSpace(c.MustRun("sinfo", "-V")) }

// Sacctmgr runs sacctmgr -i with the arguments.
func (c *Cluster) Sacctmgr(args ...string) string {
	c.t.Helper()
	return c.MustRun("sacctmgr", append([]string{"-i"}, args...)...)
}

// LoadTree runs each sacctmgr command (e.g. {"add", "account", "a",
// "parent=root", "fairshare=40"}) against this cluster.
func (c *Cluster) LoadTree(cmds [][]string) {
	c.t.Helper()
	for _, cmd := range cmds {
		c.Sacctmgr(append(cmd[:len(cmd):len(cmd)], "cluster="+c.Name)...)
	}
}

// waitFor calls ok until it returns nil, every half second for d, and
// fails the test with its last error after that. It calls ok at least
// once, d <= 0 too: a wait that never looked has no error to report.
func (c *Cluster) waitFor(what string, d time.Duration, ok func() error) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := ok()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			c.t.Fatalf("waiting %v for %s: %v", d, what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
