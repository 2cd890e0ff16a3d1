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

// maxRESTBody bounds the body FetchREST reads: at about 5 kB a row, room
// for some 50 000 associations. A variable so that tests can lower it.
var maxRESTBody int64 = 256 << 20

// FetchREST gets the shares from slurmrestd: GET
// <baseURL>/slurm/<version>/shares, version being a data_parser such as
// v0.0.44. user and token go into X-SLURM-USER-NAME and X-SLURM-USER-TOKEN
// when not empty (rest_auth/local on a unix socket needs neither; reach it
// with a client whose Transport dials the socket). A nil client is
// http.DefaultClient.
func FetchREST(ctx context.Context, client *http.Client, baseURL, version, user, token string) (*Output, error) {
	if version == "" || strings.ContainsAny(version, "/?#%") {
		return nil, fmt.Errorf("slurmrestd data_parser version %q: expected one like v0.0.44", version)
	}
	u, err := url.JoinPath(baseURL, "slurm", version, "shares")
	if err != nil {
		return nil, fmt.Errorf("slurmrestd URL %q: %w", baseURL, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd URL %q: %w", baseURL, err)
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
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("GET %s: %s: %q", u, resp.Status, head)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRESTBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the body: %w", u, err)
	}
	if int64(len(body)) > maxRESTBody {
		return nil, fmt.Errorf("GET %s: body larger than %d bytes: expected a shares document below that", u, maxRESTBody)
	}
	out, err := parseJSON(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return out, nil
}

// RunJSON runs `sshare --json -a -l -m` against the cluster of slurmConf
// (SLURM_CONF) and parses its output with ParseJSON; ctx bounds it as it
// bounds Run.
func RunJSON(ctx context.Context, slurmConf string) (*Output, error) {
	args := []string{"--json", "-a", "-l", "-m"}
	var stdout []byte
	if err := runSshare(ctx, slurmConf, func(r io.Reader) { stdout, _ = io.ReadAll(r) }, args...); err != nil {
		// sshare --json may report slurmctld's refusal only in the
		// document's errors list.
		if ctx.Err() == nil {
			if _, perr := parseJSON(stdout); errors.Is(perr, ErrSlurm) {
				return nil, fmt.Errorf("%w; %v", err, perr)
			}
		}
		return nil, err
	}
	out, err := parseJSON(stdout)
	if err != nil {
		return nil, fmt.Errorf("output of sshare %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}
