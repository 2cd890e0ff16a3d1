package sshare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxRESTBody bounds the body FetchREST reads, MaxJSONBytes; a variable
// so that tests can lower it.
var maxRESTBody int64 = MaxJSONBytes

// FetchREST gets the shares from slurmrestd: GET
// <baseURL>/slurm/<version>/shares, version being a data_parser such as
// v0.0.44. user and token go into X-SLURM-USER-NAME and X-SLURM-USER-TOKEN
// when not empty (rest_auth/local on a unix socket needs neither; reach it
// with a client whose Transport dials the socket). A nil client is
// http.DefaultClient. A redirect is an error, never followed: the token
// must reach no other host. The body is decoded as it arrives, bounded as
// ParseJSON is.
func FetchREST(ctx context.Context, client *http.Client, baseURL, version, user, token string) (*Output, error) {
	if version == "" || strings.ContainsAny(version, "/?#%") {
		return nil, fmt.Errorf("slurmrestd data_parser version %q: expected one like v0.0.44", version)
	}
	// Errors show the URL without its user and password: a site may put
	// credentials in it.
	base, err := url.Parse(baseURL)
	if err != nil || base.Host == "" {
		return nil, errors.New("slurmrestd URL: not an absolute URL: expected one like http://localhost:6820")
	}
	full := base.JoinPath("slurm", version, "shares")
	shown := *full
	shown.User = nil
	u := shown.String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, full.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd URL %s: not usable for a request", u)
	}
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set("X-SLURM-USER-NAME", user)
	}
	if token != "" {
		req.Header.Set("X-SLURM-USER-TOKEN", token)
	}
	if client == nil {
		client = http.DefaultClient
	}
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
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
		return nil, fmt.Errorf("GET %s: %s: %q", u, resp.Status, head)
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
func RunJSON(ctx context.Context, slurmConf string) (*Output, error) {
	var out *Output
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
