package slurmstate

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
)

// Process is one running slurmctld: its pid and its start in clock ticks
// after the host's boot (/proc/<pid>/stat), which a restart changes and a
// reused pid does not repeat.
type Process struct {
	PID   int
	Start uint64
}

// Ctld is the slurmctld running on this host, from SlurmctldPidFile and
// /proc: whether it restarted costs a file read, where its boot time
// costs slurmctld two RPCs (scontrol show config). An error: no
// slurmctld of that pid here (stopped, or another host's).
func Ctld(pidFile string) (Process, error) {
	b, _, err := regular.Read(pidFile, 64)
	if err != nil {
		return Process{}, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return Process{}, fmt.Errorf("%s: %q: expected a pid", pidFile, bytes.TrimSpace(b))
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Process{}, fmt.Errorf("%s: pid %d: %w", pidFile, pid, err)
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses,
	// so the fields start after the last ')'; starttime is field 22
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Process{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	if comm := string(stat[open+1 : end]); comm != "slurmctld" {
		return Process{}, fmt.Errorf("%s: pid %d is %q, not slurmctld", pidFile, pid, comm)
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 20 {
		return Process{}, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Process{}, fmt.Errorf("/proc/%d/stat: starttime %q: %w", pid, f[19], err)
	}
	return Process{PID: pid, Start: start}, nil
}
