package sshare

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// restd stands in for slurmrestd: it serves real /shares bodies of the
// captures at the versions it holds, and answers 404 with slurmrestd's
// text at any other path. It records the versions asked for.
type restd struct {
	mu     sync.Mutex
	bodies map[string][]byte // by data_parser version
	asked  []string
	tokens []string
}

// newRestd serves the capture shares-<version>.json of release (24.11,
// 25.11) for each version.
func newRestd(t *testing.T, release string, versions ...string) *restd {
	d := &restd{}
	d.serve(t, release, versions...)
	return d
}

// serve replaces what the server holds: an upgrade of slurmrestd.
func (d *restd) serve(t *testing.T, release string, versions ...string) {
	t.Helper()
	bodies := map[string][]byte{}
	for _, v := range versions {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "slurm-"+release, "shares-"+v+".json"))
		if err != nil {
			t.Fatal(err)
		}
		bodies[v] = b
	}
	d.mu.Lock()
	d.bodies = bodies
	d.mu.Unlock()
}

func (d *restd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	d.mu.Lock()
	var body []byte
	if len(parts) == 3 && parts[0] == "slurm" && parts[2] == "shares" {
		d.asked = append(d.asked, parts[1])
		d.tokens = append(d.tokens, r.Header.Get("X-SLURM-USER-TOKEN"))
		body = d.bodies[parts[1]]
	}
	d.mu.Unlock()
	if r.Header.Get("X-SLURM-USER-TOKEN") == "expired" {
		// slurmrestd authenticates before it resolves the path
		http.Error(w, `{"errors":[{"error":"Authentication failure"}]}`, http.StatusUnauthorized)
		return
	}
	if body == nil {
		http.Error(w, "Unable to find requested URL endpoint.", http.StatusNotFound)
		return
	}
	w.Write(body)
}

// took returns the versions asked for since the last call.
func (d *restd) took() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.asked
	d.asked = nil
	return a
}

// TestRESTDetectVersion: without a version, Fetch tries the newest
// data_parser version first and goes to the next on 404 only; it
// remembers the one that answered, and probes again when that one answers
// 404 (slurmrestd upgraded): a fixed version breaks on an upgrade, as
// 26.05 no longer serves v0.0.41.
func TestRESTDetectVersion(t *testing.T) {
	ctx := context.Background()
	type chosen struct{ got []string }
	newClient := func(t *testing.T, srv *httptest.Server, version string) (*REST, *chosen) {
		r, err := NewREST(srv.Client(), srv.URL, version, "slurm")
		if err != nil {
			t.Fatal(err)
		}
		c := &chosen{}
		r.Chose = func(v string) { c.got = append(c.got, v) }
		return r, c
	}

	t.Run("25.11 serving v0.0.43 and v0.0.44, then upgraded", func(t *testing.T) {
		d := newRestd(t, "25.11", "v0.0.43", "v0.0.44")
		srv := httptest.NewServer(d)
		defer srv.Close()
		r, c := newClient(t, srv, "")
		out, err := r.Fetch(ctx, "tok")
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Rows) != 17 || out.Release != "25.11.7" {
			t.Errorf("release %q, %d rows: want 25.11.7's 17", out.Release, len(out.Rows))
		}
		if a := d.took(); !slices.Equal(a, []string{"v0.0.45", "v0.0.44"}) || !slices.Equal(c.got, []string{"v0.0.44"}) || r.Version() != "v0.0.44" {
			t.Errorf("asked %v, chose %v, version %q: want v0.0.45 (404) then v0.0.44, chosen", a, c.got, r.Version())
		}
		// remembered: one request a fetch
		for range 2 {
			if _, err := r.Fetch(ctx, "tok"); err != nil {
				t.Fatal(err)
			}
		}
		if a := d.took(); !slices.Equal(a, []string{"v0.0.44", "v0.0.44"}) || len(c.got) != 1 {
			t.Errorf("asked %v, chose %v: want v0.0.44 twice and no new choice", a, c.got)
		}
		// v0.0.44 gone: probe again from the newest
		d.serve(t, "25.11", "v0.0.42", "v0.0.43")
		if _, err := r.Fetch(ctx, "tok"); err != nil {
			t.Fatal(err)
		}
		if a := d.took(); !slices.Equal(a, []string{"v0.0.44", "v0.0.45", "v0.0.43"}) || !slices.Equal(c.got, []string{"v0.0.44", "v0.0.43"}) {
			t.Errorf("asked %v, chose %v: want v0.0.44 (404), v0.0.45 (404), v0.0.43", a, c.got)
		}
	})

	t.Run("24.11 serving only v0.0.40", func(t *testing.T) {
		d := newRestd(t, "24.11", "v0.0.40")
		srv := httptest.NewServer(d)
		defer srv.Close()
		r, c := newClient(t, srv, "")
		out, err := r.Fetch(ctx, "tok")
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Rows) != 17 || out.Release != "24.11.7" {
			t.Errorf("release %q, %d rows: want 24.11.7's 17", out.Release, len(out.Rows))
		}
		if a := d.took(); !slices.Equal(a, Versions) || !slices.Equal(c.got, []string{"v0.0.40"}) {
			t.Errorf("asked %v, chose %v: want %v, v0.0.40 chosen", a, c.got, Versions)
		}
		if slices.ContainsFunc(d.tokens, func(tok string) bool { return tok != "tok" }) {
			t.Errorf("tokens sent %q: want the token with every probe", d.tokens)
		}
	})

	t.Run("none served", func(t *testing.T) {
		d := newRestd(t, "24.11")
		srv := httptest.NewServer(d)
		defer srv.Close()
		r, c := newClient(t, srv, "")
		_, err := r.Fetch(ctx, "tok")
		if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), strings.Join(Versions, ", ")) || len(c.got) != 0 || r.Version() != "" {
			t.Errorf("error %v, chose %v: want a 404 naming every version, nothing chosen", err, c.got)
		}
	})

	t.Run("authentication failure ends the probe", func(t *testing.T) {
		d := newRestd(t, "25.11", "v0.0.44")
		srv := httptest.NewServer(d)
		defer srv.Close()
		r, c := newClient(t, srv, "")
		_, err := r.Fetch(ctx, "expired")
		if a := d.took(); err == nil || !strings.Contains(err.Error(), "401") || len(a) != 1 || len(c.got) != 0 {
			t.Errorf("error %v, asked %v, chose %v: want the 401 of the first request alone", err, a, c.got)
		}
		if _, err := r.Fetch(ctx, "tok"); err != nil || r.Version() != "v0.0.44" {
			t.Errorf("after a good token: %v, version %q", err, r.Version())
		}
	})

	t.Run("version given", func(t *testing.T) {
		d := newRestd(t, "25.11", "v0.0.44")
		srv := httptest.NewServer(d)
		defer srv.Close()
		r, c := newClient(t, srv, "v0.0.43")
		_, err := r.Fetch(ctx, "tok")
		if a := d.took(); err == nil || !strings.Contains(err.Error(), "/slurm/v0.0.43/shares: 404") || !slices.Equal(a, []string{"v0.0.43"}) || len(c.got) != 0 {
			t.Errorf("error %v, asked %v, chose %v: want v0.0.43's 404 and no probing", err, a, c.got)
		}
	})
}

// TestRESTUnixSocket: a unix:// URL reaches slurmrestd on its socket
// (rest_auth/local), with no token unless one is given; errors name the
// socket.
func TestRESTUnixSocket(t *testing.T) {
	ctx := context.Background()
	d := newRestd(t, "25.11", "v0.0.43", "v0.0.44")
	var users []string
	sock := testenv.UnixHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		users = append(users, r.Header.Get("X-SLURM-USER-NAME"))
		d.mu.Unlock()
		d.ServeHTTP(w, r)
	}))

	r, err := NewREST(nil, "unix://"+sock, "", "root")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Local() || r.String() != "unix://"+sock {
		t.Errorf("local %v, shown %q: want a local unix://%s", r.Local(), r.String(), sock)
	}
	out, err := r.Fetch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Rows) != 17 || r.Version() != "v0.0.44" {
		t.Errorf("%d rows at %q: want 17 at v0.0.44", len(out.Rows), r.Version())
	}
	if _, err := r.Fetch(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.tokens, []string{"", "", "tok"}) || users[0] != "root" {
		t.Errorf("tokens %q, users %q: want none until one is given, user root", d.tokens, users)
	}

	r, err = NewREST(nil, "unix://"+filepath.Dir(sock)+"/gone.socket", "v0.0.44", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(ctx, ""); err == nil || !strings.Contains(err.Error(), "/slurm/v0.0.44/shares on unix://"+filepath.Dir(sock)+"/gone.socket") {
		t.Errorf("missing socket: %v: want an error naming it", err)
	}

	for _, bad := range []string{"unix://host/run/slurmrestd.socket", "unix:slurmrestd.socket", "unix:///run/s.socket?x=1", "unix://", "ftp://host/", "localhost:6820", "http:///no-host"} {
		if _, err := NewREST(nil, bad, "", ""); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTokenFileBounded: the token file is read as every other file
// the exporter is pointed at: a FIFO in its place is an error at once (it
// hung the report loop for good, os.ReadFile waiting for a writer), and
// so is one larger than any JWT.
func TestTokenFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), MaxTokenFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{fifo, big} {
		rest, err := NewREST(nil, "http://127.0.0.1:1", "", "root")
		if err != nil {
			t.Fatal(err)
		}
		report := rest.FetchFunc(file)
		done := make(chan error, 1)
		go func() { _, err := report(context.Background()); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "token file") || !strings.Contains(err.Error(), file) {
				t.Errorf("%s: error %v: want one naming the token file", file, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", file)
		}
	}
}

// fetchREST is one fetch at an explicit version, as serve makes them with
// --slurmrestd.api-version.
func fetchREST(ctx context.Context, client *http.Client, baseURL, version, user, token string) (*shares.Table, error) {
	r, err := NewREST(client, baseURL, version, user)
	if err != nil {
		return nil, err
	}
	return r.Fetch(ctx, token)
}

func TestFetchREST(t *testing.T) {
	body, err := os.ReadFile("../testdata/slurm-24.11/shares-v0.0.40.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/api/slurm/v0.0.40/shares" || r.Method != http.MethodGet:
			http.NotFound(w, r)
		case r.Header.Get("X-SLURM-USER-NAME") != "slurm" || r.Header.Get("X-SLURM-USER-TOKEN") != "tok":
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errors":[{"error":"Authentication failure"}]}` + strings.Repeat(" ", 1000) + "TAIL"))
		default:
			w.Write(body)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	out, err := fetchREST(ctx, srv.Client(), srv.URL+"/api/", "v0.0.40", "slurm", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Rows) != 17 || out.Release != "24.11.7" || !math.IsInf(out.Rows[1].LevelFS, 1) {
		t.Errorf("release %q, %d rows, root user %+v", out.Release, len(out.Rows), out.Rows[1])
	}

	_, err = fetchREST(ctx, srv.Client(), srv.URL+"/api", "v0.0.40", "slurm", "wrong")
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "Authentication failure") || strings.Contains(err.Error(), "TAIL") {
		t.Errorf("bad token: %v", err)
	}
	if _, err := fetchREST(ctx, srv.Client(), srv.URL+"/api", "v0.0.40/../x", "slurm", "tok"); err == nil {
		t.Error("a version with a slash was accepted")
	}

	defer func(n int64) { maxRESTBody = n }(maxRESTBody)
	maxRESTBody = int64(len(body)) - 1
	if _, err := fetchREST(ctx, srv.Client(), srv.URL+"/api", "v0.0.40", "slurm", "tok"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("body over the limit: %v", err)
	}
	maxRESTBody = int64(len(body))
	if _, err := fetchREST(ctx, srv.Client(), srv.URL+"/api", "v0.0.40", "slurm", "tok"); err != nil {
		t.Errorf("body at the limit: %v", err)
	}
}
