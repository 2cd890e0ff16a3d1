package slurmstate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCtld: the process a pid file names, if it is a slurmctld; a
// restart (a new process) is a new identity.
func TestCtld(t *testing.T) {
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	// a process whose command is slurmctld
	bin := filepath.Join(dir, "slurmctld")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "slurmctld.pid")
	start := func() (*exec.Cmd, Process) {
		cmd := exec.Command(bin, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Ctld(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		if p.PID != cmd.Process.Pid || p.Start == 0 {
			t.Fatalf("Ctld = %+v, want pid %d and its start", p, cmd.Process.Pid)
		}
		return cmd, p
	}
	first, p1 := start()
	if again, err := Ctld(pidFile); err != nil || again != p1 {
		t.Errorf("the same process read again: %+v, %v; want %+v", again, err, p1)
	}
	_ = first.Process.Kill()
	_ = first.Wait()
	if _, err := Ctld(pidFile); err == nil {
		t.Error("a pid file naming a stopped process: no error")
	}
	if _, p2 := start(); p2 == p1 {
		t.Errorf("a restart kept the identity %+v", p1)
	}
	// a pid that is not slurmctld's (this test), and no pid file
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Ctld(pidFile); err == nil {
		t.Error("the pid of another command: no error")
	}
	if _, err := Ctld(filepath.Join(dir, "none.pid")); err == nil {
		t.Error("no pid file: no error")
	}
}
