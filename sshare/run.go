package sshare

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Run runs `sshare -a -l -P -m` (-m: a Partition column, so that one
// user's associations in several partitions can be told apart) against
// the cluster of slurmConf (SLURM_CONF) and parses its output. ctx bounds
// it; the process is killed and reaped when ctx ends, or at once when its
// output passes MaxBytes or MaxRows.
func Run(ctx context.Context, slurmConf string) (*shares.Table, error) {
	var out *shares.Table
	// parsed as sshare prints it: at 100k associations the output is 14
	// MB, which a buffer held (grown to twice that) beside the rows
	read := func(r io.Reader) (err error) { out, err = Parse(r, nil); return err }
	if err := runClient(ctx, slurmConf, MaxBytes, read, "sshare", "-a", "-l", "-P", "-m"); err != nil {
		return nil, err
	}
	return out, nil
}

// stderrTail is how much of a child's stderr its error quotes: the end,
// where a Slurm client says why it failed.
const stderrTail = 4 << 10

// runClient runs a Slurm client against the cluster of slurmConf and gives
// read its standard output while it runs. What read leaves unread is
// discarded, so that the client's own exit status is what the error says:
// it comes before read's error. Wait ends the output, also when ctx kills
// the client (WaitDelay covers a child that keeps it open). More than
// limit bytes on stdout or MaxBytes on stderr, or a read error wrapping
// ErrTooLarge, kills the client at once: draining a flood until ctx ends
// would take the whole timeout.
func runClient(ctx context.Context, slurmConf string, limit int64, read func(io.Reader) error, name string, args ...string) error {
	what := strings.Join(append([]string{name}, args...), " ")
	cctx, kill := context.WithCancel(ctx)
	defer kill()
	cmd := command(cctx, slurmConf, name, args...)
	stderr := &tail{left: MaxBytes, over: kill}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	stdout := limitBytes(pr, limit)
	err := read(stdout)
	if !errors.Is(err, ErrTooLarge) {
		if _, derr := io.Copy(io.Discard, stdout); derr != nil {
			err = derr
		}
	}
	if errors.Is(err, ErrTooLarge) {
		kill()
		// unblocks the copy into pw, which Wait waits for
		pr.CloseWithError(err)
	}
	werr := <-waited
	switch {
	case stderr.exceeded():
		return fmt.Errorf("%s: stderr %w; killed", what, tooLarge(MaxBytes, "bytes"))
	case err == stdout.err:
		return fmt.Errorf("%s: output %w; killed", what, err)
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("output of %s: %w; killed", what, err)
	case werr != nil && ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case werr != nil:
		return fmt.Errorf("%s: %v: %s", what, werr, stderr)
	case err != nil:
		return fmt.Errorf("output of %s: %w", what, err)
	}
	return nil
}

// tail keeps the last stderrTail bytes written to it, and calls over once
// more than left bytes were.
type tail struct {
	mu   sync.Mutex
	b    []byte
	cut  bool
	left int64
	over func()
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.left -= int64(len(p)); t.left < 0 && t.over != nil {
		t.over()
		t.over = nil
	}
	t.b = append(t.b, p...)
	if drop := len(t.b) - stderrTail; drop > 0 {
		t.b = t.b[:copy(t.b, t.b[drop:])]
		t.cut = true
	}
	return len(p), nil
}

func (t *tail) exceeded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.left < 0
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.b), ""))
	if t.cut {
		s = "..." + s
	}
	return s
}

// command runs a Slurm client against slurmConf in a process group of its
// own, so that when ctx ends the whole group is killed: a site's wrapper
// script around sshare would otherwise leave its children running.
func command(ctx context.Context, slurmConf, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = clientEnv(os.Environ(), slurmConf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that escaped the group may still hold the pipes; without a
	// delay Wait would block on them after ctx ends.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// clientEnv is the environment of a Slurm client: SLURM_CONF, then of env
// only PATH, HOME, LANG, LC_*, TZ and SLURM_* (the options Slurm clients
// read from the environment, SLURM_JWT for auth/jwt among them). The rest
// may hold the exporter's secrets, $SLURMDBD_EXPORTER_DSN first, and a
// site's wrapper script could log or pass it on. MUNGE needs nothing: it
// uses its default socket.
func clientEnv(env []string, slurmConf string) []string {
	kept := []string{"SLURM_CONF=" + slurmConf}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "SLURM_CONF":
		case k == "PATH", k == "HOME", k == "LANG", k == "TZ", strings.HasPrefix(k, "LC_"), strings.HasPrefix(k, "SLURM_"):
			kept = append(kept, kv)
		}
	}
	return kept
}

// BootTime asks slurmctld when it started (scontrol show config,
// BOOT_TIME, local time): it keeps associations loaded at boot in the
// database's order and appends later ones.
func BootTime(ctx context.Context, slurmConf string) (time.Time, error) {
	var boot time.Time
	read := func(r io.Reader) (err error) {
		boot, err = ParseBootTime(r)
		return err
	}
	if err := runClient(ctx, slurmConf, MaxBytes, read, "scontrol", "show", "config"); err != nil {
		return time.Time{}, err
	}
	return boot, nil
}

// ParseBootTime reads BOOT_TIME from the output of `scontrol show config`,
// in local time as scontrol prints it.
func ParseBootTime(r io.Reader) (time.Time, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "BOOT_TIME" {
			t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(v), time.Local)
			if err != nil {
				return time.Time{}, fmt.Errorf("BOOT_TIME %q: %w", strings.TrimSpace(v), err)
			}
			return t, nil
		}
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, errors.New("no BOOT_TIME: expected the output of 'scontrol show config'")
}
