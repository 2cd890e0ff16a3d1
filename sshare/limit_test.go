package sshare

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// heapBound is what a flood may add to the heap: MaxRows rows are 74 MB,
// measured peaks 100 to 165 MB. Before the limits, floods took gigabytes.
const heapBound = 256 << 20

// TestRunFlood: a stand-in sshare that floods stdout or stderr is killed
// as soon as it passes a limit, well before the timeout, with an error
// naming the limit, and the heap stays bounded.
func TestRunFlood(t *testing.T) {
	const row = "'   b|u1||1|1.000000|9425|0.215411|0.869333|0.777778|1.150308||cpu=0'"
	header := "echo 'Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins'\n"
	for _, tc := range []struct {
		name, script, want string
		run                func(context.Context, string) (*shares.Table, error)
	}{
		{"rows", header + "exec yes " + row, "output of sshare -a -l -P -m: sshare line 400002: larger than the limit of 400000 rows; killed", Run},
		{"no header", "exec yes 'x|x|1|0.5|5|0.1|0.1|0.5|1.0||'", "sshare -a -l -P -m: output larger than the limit of 67108864 bytes; killed", Run},
		{"one endless line", "yes | tr -d '\\n'", "sshare line 1: larger than the limit of 1048576 bytes on a line; killed", Run},
		{"stderr", "exec yes 'sshare: error: Unable to contact slurm controller' >&2", "sshare -a -l -P -m: stderr larger than the limit of 67108864 bytes; killed", Run},
		{"json, no document", "exec yes 'x|x|1|0.5|5|0.1|0.1|0.5|1.0||'", "sshare --json -a -l -m: output larger than the limit of 2147483648 bytes; killed", RunJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			fakeSshare(t, "echo $$ > "+pidFile+"\n"+tc.script+"\n")
			// draining 2 GiB of --json output takes 1.3 s, 9 s with -race
			const timeout = time.Minute
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			var err error
			peak := testenv.HeapRise(cancel, func() { _, err = tc.run(ctx, "x") })
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrTooLarge) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if took > timeout/4 {
				t.Errorf("took %v: want the flood killed well before the %v timeout", took, timeout)
			}
			if peak > heapBound {
				t.Errorf("heap rose %d MB: want at most %d MB", peak>>20, heapBound>>20)
			}
			t.Logf("%v, heap +%d MB", took.Round(time.Millisecond), peak>>20)
			if b, _ := os.ReadFile(pidFile); testenv.Running(strings.TrimSpace(string(b))) {
				t.Errorf("sshare (pid %s) still running or not reaped", b)
			}
		})
	}
}

// TestClientEnv: a Slurm client gets SLURM_CONF, PATH, locale, TZ, HOME
// and SLURM_* from the exporter's environment, nothing else: not the
// database DSN, nor any other of the exporter's variables.
func TestClientEnv(t *testing.T) {
	capture, err := filepath.Abs("../testdata/slurm-24.11/sshare-a-l-P-m.txt")
	if err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(t.TempDir(), "env")
	fakeSshare(t, "env > "+envFile+"\ncat "+capture+"\n")
	for k, v := range map[string]string{
		"SLURMDBD_EXPORTER_DSN":           "exporter:secret@tcp(db:3306)/slurm_acct_db",
		"SLURMDBD_EXPORTER_WEB_CONFIG":    "/etc/web.yml",
		"AWS_SECRET_ACCESS_KEY":           "secret",
		"LD_PRELOAD":                      "/tmp/evil.so",
		"SLURM_CONF":                      "/elsewhere/slurm.conf",
		"SLURM_TIME_FORMAT":               "standard",
		"LC_ALL":                          "C",
		"TZ":                              "UTC",
		"HOME":                            "/var/lib/exporter",
		"SLURMRESTD_SECURITY_NOT_A_SLURM": "x",
	} {
		t.Setenv(k, v)
	}
	if _, err := Run(context.Background(), "/etc/slurm/test.conf"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	for k, want := range map[string]string{"SLURM_CONF": "/etc/slurm/test.conf", "SLURM_TIME_FORMAT": "standard", "LC_ALL": "C", "TZ": "UTC", "HOME": "/var/lib/exporter", "PATH": os.Getenv("PATH")} {
		if len(got[k]) != 1 || got[k][0] != want {
			t.Errorf("%s=%q in the child, want %q once", k, got[k], want)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "SLURMDBD_EXPORTER_") || k == "AWS_SECRET_ACCESS_KEY" || k == "LD_PRELOAD" || k == "SLURMRESTD_SECURITY_NOT_A_SLURM" {
			t.Errorf("%s passed to the child", k)
		}
	}
}

// TestFetchRESTRedirect: a redirect is not followed, so the token reaches
// no other host; the error names the redirect's host, not the token.
func TestFetchRESTRedirect(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("X-SLURM-USER-TOKEN") != "" {
			t.Errorf("the other host got the token %q", r.Header.Get("X-SLURM-USER-TOKEN"))
		}
		http.NotFound(w, r)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/steal", http.StatusTemporaryRedirect))
	defer srv.Close()
	otherURL, _ := url.Parse(other.URL)
	for _, client := range []*http.Client{srv.Client(), nil} {
		_, err := fetchREST(context.Background(), client, srv.URL, "v0.0.44", "slurm", "s3cret-token")
		if err == nil || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), otherURL.Host) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("redirect: %v: want an error naming %s and not the token", err, otherURL.Host)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the other host was asked %d times: want none", n)
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Error("FetchREST changed http.DefaultClient")
	}
}

// TestFetchRESTFlood: a body that never ends stops at a limit: rows past
// MaxRows, one value past a line's limit; the heap holds at most the rows.
func TestFetchRESTFlood(t *testing.T) {
	defer func(n int64) { maxRESTBody = n }(maxRESTBody)
	const user = `{"cluster":"c","name":"u1","parent":"root","shares":{"set":true,"infinite":false,"number":1},"usage":10,"effective_usage":0.5,"fairshare":{"factor":0.5,"level":1.0},"type":["USER"]},`
	for _, tc := range []struct {
		name, head, repeat, want string
		body                     int64 // limit, if not MaxJSONBytes
	}{
		{"rows", `{"shares":{"shares":[` + jsonRoot + ",", user, "shares row 400001: larger than the limit of 400000 rows", 0},
		{"one endless name", `{"shares":{"shares":[{"name":"`, "x", "larger than the limit of 1048576 bytes in one JSON value", 0},
		{"endless whitespace", `{"shares":{"shares":[` + jsonRoot, " \n", "larger than the limit of 1048576 bytes in one JSON value", 0},
		{"endless meta", `{"meta":{"plugins":[`, `"x",`, "larger than the limit of 1048576 bytes in one JSON value", 0},
		{"endless unknown value", `{"shares":{"total_shares":[`, `1e999999,`, "larger than the limit of 1048576 bytes in one JSON value", 0},
		// only the body's size bounds the errors list: lowered, to be quick
		{"endless errors", `{"errors":[`, `{"error":"x"},`, "larger than the limit of 67108864 bytes", MaxBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxRESTBody = cmp.Or(tc.body, MaxJSONBytes)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				bw := bufio.NewWriterSize(w, 64<<10)
				bw.WriteString(tc.head)
				for {
					if _, err := bw.WriteString(tc.repeat); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			// a safety net: the rows take 4 s, 40 s with -race
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var err error
			peak := testenv.HeapRise(cancel, func() { _, err = fetchREST(ctx, srv.Client(), srv.URL, "v0.0.44", "", "") })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrTooLarge) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if peak > heapBound {
				t.Errorf("heap rose %d MB: want at most %d MB", peak>>20, heapBound>>20)
			}
			t.Logf("heap +%d MB", peak>>20)
		})
	}
}

// TestParseLimits: text past a limit, binary, cut or inconsistent input
// is an error naming the line; blank lines count; a BOM is skipped.
func TestParseLimits(t *testing.T) {
	h := "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins\n"
	root := "root|||0.000000|43756||1.000000||||cpu=0\n"
	repeat := func(head, line string, n int) io.Reader {
		return io.MultiReader(strings.NewReader(head), &repeater{line: line, n: n})
	}
	for _, tc := range []struct {
		name string
		in   io.Reader
		want string
	}{
		{"rows", repeat(h, " root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf||cpu=0\n", MaxRows+1), "line 400002: larger than the limit of 400000 rows"},
		{"bytes", repeat(h+root, "  \n", MaxBytes), "larger than the limit of 67108864 bytes"},
		{"long line after blank lines", repeat(h+"\n\n", "x", maxLine+1), "line 4: larger than the limit of 1048576 bytes on a line"},
		{"binary", strings.NewReader(h + root + "\x00\x01\x02|\xff\n"), "line 3: a NUL byte"},
		{"cut in the last field", strings.NewReader(h + root + " root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf||cpu="), "line 3: no newline at the end"},
		{"cut mid-number", strings.NewReader("Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\nroot|||0.000000|43756|1.000000|\n root|root|1|0.009901|0|0.000000|1.0"), "line 3: no newline at the end"},
		{"-p header, -P row", strings.NewReader(strings.Replace(h, "\n", "|\n", 1) + root), "line 2: no '|' at the end"},
		{"error after blank lines", strings.NewReader(h + "\n\n" + "root|||x|1||1.0||||\n"), "line 4: NormShares"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	out, err := Parse(strings.NewReader("\ufeff"+h+root), nil)
	if err != nil || !out.Header || len(out.Rows) != 1 || out.Rows[0].Line != 2 {
		t.Errorf("with a BOM: %v, %+v", err, out)
	}
	if _, err := Parse(repeat(h, " root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf||cpu=0\n", MaxRows), nil); err != nil {
		t.Errorf("MaxRows rows: %v", err)
	}
}

// repeater is line n times.
type repeater struct {
	line string
	n    int
	off  int
}

func (r *repeater) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 && r.n > 0 {
		c := copy(p, r.line[r.off:])
		p, total, r.off = p[c:], total+c, r.off+c
		if r.off == len(r.line) {
			r.off, r.n = 0, r.n-1
		}
	}
	if total == 0 {
		return 0, io.EOF
	}
	return total, nil
}

// TestUnique: an association listed twice is named with both lines;
// without a Partition column only account rows are checked, as one user's
// rows in several partitions look alike.
func TestUnique(t *testing.T) {
	b, err := os.ReadFile("../testdata/slurm-24.11/sshare-a-l-P-m.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	with := func(dup int) string { // line dup again at the end
		return strings.Join(lines, "") + lines[dup-1]
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"user", with(6), `line 19: account "b", user "u1", partition "" again (first on line 6)`},
		{"account", with(4), `line 19: account "a", user "", partition "" again (first on line 4)`},
		{"none", strings.Join(lines, ""), ""},
	} {
		out, err := Parse(strings.NewReader(tc.in), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = out.Unique()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	out, _ := Parse(strings.NewReader(with(6)), nil)
	out.Columns = shares.Columns(true, true, false) // as without -m
	if err := out.Unique(); err != nil {
		t.Errorf("a user's row twice without a Partition column: %v, want no error", err)
	}
}

// TestFetchRESTRedactsURL: credentials in --slurmrestd.url (basic auth in
// front of slurmrestd) appear in no error: a failing slurmrestd is
// logged at every read.
func TestFetchRESTRedactsURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, base := range []string{srv.URL, closed.URL, "http://exp%zz:s3cr3tpw@host"} {
		withCreds := strings.Replace(base, "http://", "http://exporter:s3cr3tpw@", 1)
		_, err := fetchREST(context.Background(), nil, withCreds, "v0.0.41", "", "")
		if err == nil {
			t.Fatalf("%s: no error", base)
		}
		if strings.Contains(err.Error(), "s3cr3tpw") || strings.Contains(err.Error(), "exporter:") {
			t.Errorf("the URL's credentials are in the error: %v", err)
		}
	}
}
