package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// TestServeSlurmrestd: serve reaches a slurmrestd on a unix socket
// without a token file (rest_auth/local), detects the data_parser version
// by default and logs it; an http(s) URL still needs the token file, and a
// bad URL is refused at startup. Before, the default version was v0.0.41
// (404 on 26.05) and a token file was required whatever the URL.
func TestServeSlurmrestd(t *testing.T) {
	body, err := os.ReadFile("testdata/slurm-25.11/shares-v0.0.44.json")
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path)
		if r.URL.Path != "/slurm/v0.0.44/shares" || r.Header.Get("X-SLURM-USER-TOKEN") != "" {
			http.Error(w, "Unable to find requested URL endpoint.", http.StatusNotFound)
			return
		}
		w.Write(body)
	})
	sock := testenv.UnixHTTPServer(t, h)

	parse := func(args ...string) (*commandLine, error) {
		var c commandLine
		p, err := newParser(&c, kong.Exit(func(int) {}), kong.Writers(io.Discard, io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Parse(append([]string{"serve", "--reported.source", "slurmrestd"}, args...))
		return &c, err
	}
	c, err := parse("--slurmrestd.url", "unix://"+sock)
	if err != nil {
		t.Fatalf("unix socket without --slurmrestd.token-file: %v", err)
	}
	if c.Serve.RestVersion != "" {
		t.Errorf("--slurmrestd.api-version defaults to %q: want none (detected)", c.Serve.RestVersion)
	}
	var logs bytes.Buffer
	report, err := c.Serve.RESTReport(zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	out, err := report(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Rows) != 17 || !strings.Contains(asked[len(asked)-1], "v0.0.44") {
		t.Errorf("%d rows, asked %v: want 17 from v0.0.44", len(out.Rows), asked)
	}
	if !strings.Contains(logs.String(), `"api_version":"v0.0.44"`) || !strings.Contains(logs.String(), "unix://"+sock) {
		t.Errorf("log %q: want the version chosen and the socket", logs.String())
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--slurmrestd.url", "http://localhost:6820"}, "expected --slurmrestd.token-file"},
		{[]string{"--slurmrestd.url", "unix://host/run/slurmrestd.socket"}, "expected unix:///absolute/path"},
		{[]string{"--slurmrestd.url", "unix://" + sock, "--slurmrestd.api-version", "v0.0.44/x"}, "expected one like v0.0.44"},
	} {
		if _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.msg)
		}
	}
}
