// Package testenv gives integration tests the components they need: under
// CI=true a missing component fails the test, never skips it, and as root
// missing Debian packages are installed.
package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// CI reports whether integration tests must run (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips the test, or fails it under CI.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

var aptMu sync.Mutex

// Require makes sure the binaries are on PATH, installing the Debian
// packages with apt-get when some are missing and the test runs as root.
// Outside CI, -short skips integration tests.
func Require(t testing.TB, binaries, packages []string) {
	t.Helper()
	if testing.Short() && !CI() {
		t.Skip("integration test: skipped with -short")
	}
	if missing(binaries) == nil {
		return
	}
	if os.Geteuid() != 0 {
		SkipOrFail(t, "missing %s and not root to install %s", strings.Join(missing(binaries), ", "), strings.Join(packages, " "))
	}
	aptMu.Lock()
	defer aptMu.Unlock()
	if missing(binaries) == nil {
		return
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq"}, packages...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			SkipOrFail(t, "apt-get %s: %v\n%s", strings.Join(args, " "), err, Tail(out))
		}
	}
	if m := missing(binaries); m != nil {
		SkipOrFail(t, "still missing after apt-get install: %s", strings.Join(m, ", "))
	}
}

func missing(binaries []string) []string {
	var m []string
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			m = append(m, b)
		}
	}
	return m
}

// Tail is the end of a long output, for failure messages.
func Tail(b []byte) string {
	const n = 3000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Running reports whether process pid exists and is not a zombie (an
// orphan is init's to reap; a zombie child is its parent's fault).
func Running(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
