package sshare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// maxRESTBody bounds the body a REST fetch reads, MaxJSONBytes; a
// variable so that tests can lower it.
var maxRESTBody int64 = MaxJSONBytes

// Versions are the data_parser versions of slurmrestd's /shares that
// ParseJSON reads, newest first: the ones Slurm 23.11 to 26.05 serve
// (24.11: v0.0.40-v0.0.42, 25.11: v0.0.41-v0.0.44, 26.05: v0.0.42-v0.0.45).
// v0.0.45's shares schema is v0.0.44's (parsers.c of SchedMD/slurm's
// slurm-26-05-3-1); later versions are left out until a capture shows
// them.
var Versions = []string{"v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40"}

// REST reads the shares from one slurmrestd: GET
// <URL>/slurm/<version>/shares. Safe for concurrent use.
type REST struct {
	// Chose, if set, is told the version that detection picked: at the
	// first good fetch, and again after that version answered 404 (an
	// upgrade of slurmrestd) and another was found.
	Chose func(version string)

	client        *http.Client // never follows a redirect
	base          *url.URL     // for a unix socket, http://localhost
	socket        string       // the unix socket's path, or ""
	version, user string

	mu    sync.Mutex
	found string // the version detection picked
}

// NewREST checks slurmrestd's URL and data_parser version and returns a
// client for them. rawURL is http(s)://host[:port][/prefix] or
// unix:///path/to/slurmrestd.socket (slurmrestd listening on a unix
// socket, where rest_auth/local needs no token). version is a data_parser
// version such as v0.0.44, or "" to use the newest of Versions the server
// serves: Fetch tries them newest first, going to the next on 404,
// remembers the one that answered and probes again if it later answers 404.
// user goes into X-SLURM-USER-NAME when not empty (rest_auth/local reads
// it only from a root client). client serves http(s) URLs (nil: one with
// http.DefaultTransport); a unix URL gets a client of its own that dials
// the socket. A redirect is an error, never followed: the token must reach
// no other host.
func NewREST(client *http.Client, rawURL, version, user string) (*REST, error) {
	if version != "" && (strings.ContainsAny(version, "/?#%") || strings.TrimSpace(version) != version) {
		return nil, fmt.Errorf("slurmrestd data_parser version %q: expected one like v0.0.44, or none to detect it", version)
	}
	// Errors show the URL without its user and password: a site may put
	// credentials in it.
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("slurmrestd URL: not a URL: expected one like http://localhost:6820 or unix:///run/slurmrestd/slurmrestd.socket")
	}
	r := &REST{version: version, user: user}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("slurmrestd URL: no host in the %s URL: expected one like http://localhost:6820", u.Scheme)
		}
		r.base = u
		if client == nil {
			client = &http.Client{}
		}
	case "unix":
		if u.Host != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, errors.New("slurmrestd URL: expected unix:///absolute/path/to/slurmrestd.socket, nothing else")
		}
		r.socket = u.Path
		r.base = &url.URL{Scheme: "http", Host: "localhost"}
		var d net.Dialer
		client = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", r.socket)
			},
			MaxIdleConns: 2, IdleConnTimeout: 90 * time.Second,
		}}
	default:
		return nil, errors.New("slurmrestd URL: expected http://, https:// or unix:///path/to/slurmrestd.socket")
	}
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	r.client = &noRedirect
	return r, nil
}

// Local reports whether the URL is a unix socket, where slurmrestd may
// authenticate by the peer's uid (rest_auth/local) instead of a token.
func (r *REST) Local() bool { return r.socket != "" }

// String is the URL without user and password.
func (r *REST) String() string {
	if r.socket != "" {
		return "unix://" + r.socket
	}
	shown := *r.base
	shown.User = nil
	return shown.String()
}

// Version is the data_parser version in use: the one given, or the one
// detection picked ("" before the first good fetch).
func (r *REST) Version() string {
	if r.version != "" {
		return r.version
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.found
}

// Fetch gets the shares, sending token as X-SLURM-USER-TOKEN when not
// empty. The body is decoded as it arrives, bounded as ParseJSON is.
func (r *REST) Fetch(ctx context.Context, token string) (*shares.Table, error) {
	if r.version != "" {
		return r.get(ctx, r.version, token)
	}
	r.mu.Lock()
	last := r.found
	r.mu.Unlock()
	if last != "" {
		out, err := r.get(ctx, last, token)
		if !notFound(err) {
			return out, err
		}
	}
	for _, v := range Versions {
		if v == last {
			continue
		}
		out, err := r.get(ctx, v, token)
		if notFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.found = v
		r.mu.Unlock()
		if r.Chose != nil {
			r.Chose(v)
		}
		return out, nil
	}
	r.mu.Lock()
	r.found = ""
	r.mu.Unlock()
	return nil, fmt.Errorf("GET %s: 404 Not Found at every data_parser version this exporter reads (%s): expected slurmrestd 23.11 or later at this URL, with one of them loaded (slurmrestd -d)",
		r.where("<version>"), strings.Join(Versions, ", "))
}

// MaxTokenFile bounds what a token file reads: a JWT is some hundred
// bytes.
const MaxTokenFile = 64 << 10

// FetchFunc is Fetch with the token read from tokenFile at every request
// ("": none), so that a token renewed on disk is used at once. The file
// is read as every other file the exporter is pointed at: a FIFO in its
// place is an error at once (os.ReadFile would wait for a writer for
// good), and so is one larger than any JWT.
func (r *REST) FetchFunc(tokenFile string) func(context.Context) (*shares.Table, error) {
	return func(ctx context.Context) (*shares.Table, error) {
		var tok string
		if tokenFile != "" {
			b, _, err := regular.Read(tokenFile, MaxTokenFile)
			if err != nil {
				return nil, fmt.Errorf("slurmrestd token file: %w", err)
			}
			tok = strings.TrimSpace(string(b))
		}
		return r.Fetch(ctx, tok)
	}
}

// statusError is a response other than 2xx.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func notFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == http.StatusNotFound
}

// where names the shares endpoint of version in errors.
func (r *REST) where(version string) string {
	path := "/slurm/" + version + "/shares"
	if r.socket != "" {
		return path + " on unix://" + r.socket
	}
	return strings.TrimSuffix(r.String(), "/") + path
}

func (r *REST) get(ctx context.Context, version, token string) (*shares.Table, error) {
	u := r.where(version)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base.JoinPath("slurm", version, "shares").String(), nil)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd URL %s: not usable for a request", u)
	}
	req.Header.Set("Accept", "application/json")
	if r.user != "" {
		req.Header.Set("X-SLURM-USER-NAME", r.user)
	}
	if token != "" {
		req.Header.Set("X-SLURM-USER-TOKEN", token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		// net/http shows the user name
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = u
		}
		return nil, err
	}
	defer resp.Body.Close()
	if loc, err := resp.Location(); err == nil {
		return nil, fmt.Errorf("GET %s: %s, a redirect to host %q: not followed, so that the token goes to no other host: expected the slurmrestd URL to serve the shares itself", u, resp.Status, loc.Host)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, &statusError{resp.StatusCode, fmt.Sprintf("GET %s: %s: %q", u, resp.Status, head)}
	}
	out, err := parseJSON(resp.Body, maxRESTBody)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return out, nil
}

// RunJSON runs `sshare --json -a -l -m` against the cluster of slurmConf
// (SLURM_CONF) and parses its output with ParseJSON; ctx and the limits
// bound it as they bound Run.
func RunJSON(ctx context.Context, slurmConf string) (*shares.Table, error) {
	var out *shares.Table
	var perr error
	read := func(r io.Reader) error { out, perr = ParseJSON(r); return perr }
	if err := runClient(ctx, slurmConf, MaxJSONBytes, read, "sshare", "--json", "-a", "-l", "-m"); err != nil {
		// sshare --json may report slurmctld's refusal only in the
		// document's errors list.
		if ctx.Err() == nil && errors.Is(perr, ErrSlurm) && !errors.Is(err, ErrSlurm) {
			return nil, fmt.Errorf("%w; %v", err, perr)
		}
		return nil, err
	}
	return out, nil
}
