package testenv

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// UnixHTTPServer serves h on a unix socket until the test ends and
// returns the socket's path (slurmrestd listening on one).
func UnixHTTPServer(t testing.TB, h http.Handler) string {
	t.Helper()
	// a short path: sun_path holds 108 bytes
	dir, err := os.MkdirTemp("", "restd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "slurmrestd.socket")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("unix socket: %v", err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}
