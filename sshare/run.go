package sshare

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Run runs `sshare -a -l -P -m` (-m: a Partition column, so that one
// user's associations in several partitions can be told apart) against
// the cluster of slurmConf (SLURM_CONF) and parses its output. ctx bounds
// it; the process is killed and reaped when ctx ends.
func Run(ctx context.Context, slurmConf string) (*Output, error) {
	args := []string{"-a", "-l", "-P", "-m"}
	var out *Output
	var perr error
	// parsed as sshare prints it: at 100k associations the output is 14
	// MB, which a buffer held (grown to twice that) beside the rows
	if err := runSshare(ctx, slurmConf, func(r io.Reader) { out, perr = Parse(r, nil) }, args...); err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, fmt.Errorf("output of sshare %s: %w", strings.Join(args, " "), perr)
	}
	return out, nil
}

// runSshare runs sshare with args against the cluster of slurmConf and
// gives read its standard output while it runs. What read leaves unread
// is discarded, so that sshare's own exit status is what the error says:
// it comes before what read made of the output. Wait ends the output,
// also when ctx kills sshare (WaitDelay covers a child that keeps it
// open).
func runSshare(ctx context.Context, slurmConf string, read func(io.Reader), args ...string) error {
	name := "sshare " + strings.Join(args, " ")
	cmd := command(ctx, slurmConf, "sshare", args...)
	var stderr bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	read(pr)
	io.Copy(io.Discard, pr)
	switch err := <-waited; {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%s: %w", name, ctx.Err())
	case err != nil:
		return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// command runs a Slurm client against slurmConf in a process group of its
// own, so that when ctx ends the whole group is killed: a site's wrapper
// script around sshare would otherwise leave its children running.
func command(ctx context.Context, slurmConf, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+slurmConf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that escaped the group may still hold the pipes; without a
	// delay Wait would block on them after ctx ends.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// BootTime asks slurmctld when it started (scontrol show config,
// BOOT_TIME, local time): it keeps associations loaded at boot in the
// database's order and appends later ones.
func BootTime(ctx context.Context, slurmConf string) (time.Time, error) {
	out, err := command(ctx, slurmConf, "scontrol", "show", "config").Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("scontrol show config: %w", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == "BOOT_TIME" {
			t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(v), time.Local)
			if err != nil {
				return time.Time{}, fmt.Errorf("scontrol show config: BOOT_TIME %q: %w", strings.TrimSpace(v), err)
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("scontrol show config: no BOOT_TIME")
}
