// Package e2e holds the tests that drive the built slurmdbd_exporter
// binary, real Slurm 22.05 and Prometheus; unit tests stay beside their
// code.
package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// exporter is the binary every test runs, built once by TestMain (a
// build per test was 14 builds a run).
var exporter string

// exitError is the exit code of bad input or a failure (main.exitError).
const exitError = 2

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "slurmdbd_exporter-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exporter = filepath.Join(dir, "slurmdbd_exporter")
	// go test puts its own toolchain first on PATH.
	if out, err := exec.Command("go", "build", "-o", exporter, "..").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runExporter runs one command of the binary to its end.
func runExporter(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runExporterEnv(t, nil, args...)
}

// runExporterEnv is runExporter with env as the environment (nil: this
// process's).
func runExporterEnv(t testing.TB, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr, _ = runExporterProc(t, env, args...)
	return code, stdout, stderr
}

// runExporterProc is runExporterEnv with the finished process's state
// (its CPU and its children's, for one).
func runExporterProc(t testing.TB, env []string, args ...string) (code int, stdout, stderr string, ps *os.ProcessState) {
	t.Helper()
	return runBinary(t, exporter, env, args...)
}

// runBinary is runExporterProc with bin for the binary (another build's,
// for TestSameOutput).
func runBinary(t testing.TB, bin string, env []string, args ...string) (code int, stdout, stderr string, ps *os.ProcessState) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", bin, err)
	}
	return code, o.String(), e.String(), cmd.ProcessState
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeDSN writes dsn to a file only its owner reads, as --dsn-file wants.
func writeDSN(t testing.TB, dsn string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(path, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
