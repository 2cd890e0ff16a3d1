// Package mariadbtest runs a throwaway MariaDB server in a temporary
// directory, on a private loopback port, for tests: it starts in about two
// seconds and is removed afterwards.
package mariadbtest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// Server is a running MariaDB whose root user has no password.
type Server struct {
	Dir  string
	Port int
	t    testing.TB
	cmd  *exec.Cmd
}

// Start installs MariaDB when missing (see testenv.Require), starts a
// server in dir (a new temporary directory when empty) and stops it when
// the test ends.
func Start(t testing.TB, dir string) *Server {
	t.Helper()
	testenv.Require(t, []string{"mariadb-install-db", "mariadbd", "mariadb", "mariadb-dump"}, []string{"mariadb-server", "mariadb-client"})
	if dir == "" {
		d, err := os.MkdirTemp("", "mdb")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	s := &Server{Dir: dir, t: t}
	if err := os.MkdirAll(s.tmp(), 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "db")
	// The bootstrap server needs the private tmpdir too: in the shared
	// /tmp its temporary table vanished under it (seen in CI: "Could not
	// remove temporary table", then "Unknown table 'mysql.tmp_user_sys'").
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+s.tmp()).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, testenv.Tail(out))
	}
	for attempt := 1; !s.start(freePort(t)); attempt++ {
		if attempt == 5 {
			t.Fatalf("MariaDB: another process took each of 5 free ports before the server bound it")
		}
	}
	t.Cleanup(s.Stop)
	return s
}

// freePort is a loopback port nothing listens on now. Between closing it
// and the server binding it, another test may take it: start checks.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start starts the server on port and waits until it answers there. It
// is false when the server exited or another one answers instead: two
// parallel tests picked the same free port, and the one whose server came
// second was loading its data into the other's (seen in CI: "database
// exists").
func (s *Server) start(port int) bool {
	s.t.Helper()
	s.Port = port
	logf, err := os.OpenFile(filepath.Join(s.Dir, "mariadbd.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	data, err := filepath.Abs(filepath.Join(s.Dir, "db"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+data,
		"--socket="+filepath.Join(s.Dir, "my.sock"), fmt.Sprintf("--port=%d", s.Port), "--bind-address=127.0.0.1",
		"--pid-file="+filepath.Join(s.Dir, "db.pid"), "--log-error="+filepath.Join(s.Dir, "db.err"),
		"--innodb-buffer-pool-size=128M", "--innodb-lock-wait-timeout=900", "--skip-log-bin",
		// a tmpdir of its own: in the shared /tmp one server's internal
		// temporary table vanished under it while others ran (seen in CI)
		"--tmpdir="+s.tmp())
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a test killed by its timeout takes the server along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting mariadbd: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			s.cmd = nil
			return false
		default:
		}
		if out, err := s.SQL("SELECT @@datadir"); err == nil {
			if filepath.Clean(strings.TrimSpace(out)) == data {
				return true
			}
			s.Stop() // another server on the port: ours cannot bind it
			return false
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.Dir, "db.err"))
			s.t.Fatalf("MariaDB did not answer in 60 s: %v\n%s", err, testenv.Tail(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop stops the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(s.cmd.Process.Pid, 0) != nil {
			break
		}
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd = nil
}

// tmp is the server's own tmpdir.
func (s *Server) tmp() string { return filepath.Join(s.Dir, "tmp") }

// Restart starts a stopped server again on the same port and data.
func (s *Server) Restart() {
	s.t.Helper()
	if !s.start(s.Port) {
		s.t.Fatalf("MariaDB restart: port %d taken by another process", s.Port)
	}
}

// SQL runs statements as root and returns the tab-separated result
// without a header.
func (s *Server) SQL(stmts string) (string, error) {
	out, err := exec.Command("mariadb", "--no-defaults", "-h127.0.0.1", fmt.Sprintf("-P%d", s.Port), "-uroot", "-N", "-B", "-e", stmts).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("mariadb: %v: %s", err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// MustSQL is SQL that fails the test on error.
func (s *Server) MustSQL(stmts string) string {
	s.t.Helper()
	out, err := s.SQL(stmts)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Load creates database db and runs a mariadb-dump in it as root; a file
// ending in .gz is decompressed first.
func (s *Server) Load(db, file string) {
	s.t.Helper()
	f, err := os.Open(file)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(file, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			s.t.Fatalf("%s: %v", file, err)
		}
		r = z
	}
	s.MustSQL("CREATE DATABASE `" + db + "`")
	cmd := exec.Command("mariadb", "--no-defaults", "-h127.0.0.1", fmt.Sprintf("-P%d", s.Port), "-uroot", db)
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("loading %s: %v\n%s", file, err, testenv.Tail(out))
	}
}

// CreateReader adds user with password and only SELECT on db, as the
// exporter's documentation asks of a site.
func (s *Server) CreateReader(user, password, db string) {
	s.t.Helper()
	for _, host := range []string{"localhost", "127.0.0.1"} {
		s.MustSQL(fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'; GRANT SELECT ON `%s`.* TO '%s'@'%s'", user, host, password, db, user, host))
	}
}

// DSN is a go-sql-driver/mysql DSN for user on this server.
func (s *Server) DSN(user, password, db string) string {
	return fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s", user, password, s.Port, db)
}
