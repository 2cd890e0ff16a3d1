package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// Load test: `make load` prints its table; `make test` runs it too, and
// fails only on errors, never on timings.
const (
	loadAssociations = 11112 // the size of the 11k tree of the scale measurements
	loadClients      = 100
	loadScrapes      = 1000
)

// TestLoadTLSBasicAuth: 1000 scrapes from 100 concurrent clients, each
// with its own TLS connection, with basic auth, against serve --demo with
// 11,112 associations: no errors; p50/p99/max latency and peak RSS are
// logged. A wrong password and no password get 401.
func TestLoadTLSBasicAuth(t *testing.T) {
	dir := t.TempDir()
	pool := selfSigned(t, dir)
	const user, password = "prometheus", "load-test-password"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(web, []byte(fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n",
		filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), user, hash)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var logs strings.Builder
	cmd := exec.Command(exporter, "serve", "--demo", "--demo.associations", strconv.Itoa(loadAssociations),
		"--web.listen-address", addr, "--web.config.file", web)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("exporter log:\n%s", testenv.Tail([]byte(logs.String())))
		}
	}()
	url := "https://" + addr + "/metrics"
	client := func() *http.Client {
		// as Prometheus: gzip asked for, the compressed body read
		return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, DisableCompression: true}}
	}
	get := func(c *http.Client, u, p string) (int, int64, error) { return scrapeGzip(c, url, u, p) }
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code, _, err := get(client(), user, password); err == nil && code == 200 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("not serving after 60 s: %d %v\n%s", code, err, logs.String())
		}
	}
	for _, c := range []struct{ user, password string }{{user, "wrong"}, {"", ""}, {"nobody", password}} {
		if code, _, err := get(client(), c.user, c.password); err != nil || code != 401 {
			t.Errorf("user %q password %q: %d %v, want 401", c.user, c.password, code, err)
		}
	}

	idle, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	took, bytes, failures := scrapeConcurrently(loadClients, loadScrapes/loadClients, client, func(c *http.Client) (int, int64, error) {
		return get(c, user, password)
	})
	wall := time.Since(start)
	if len(failures) > 0 {
		t.Errorf("%d of %d scrapes failed, first: %s", len(failures), len(took), failures[0])
	}
	q := func(p float64) time.Duration { return took[int(p*float64(len(took)-1))].Round(100 * time.Microsecond) }
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("serve --demo --demo.associations %d, TLS + basic auth, %d clients x %d scrapes (gzip, %d KiB each): %d errors, wall %v",
		loadAssociations, loadClients, loadScrapes/loadClients, bytes/int64(len(took))/1024, len(failures), wall.Round(time.Millisecond))
	t.Logf("latency p50 %v, p99 %v, max %v", q(0.5), q(0.99), q(1))
	t.Logf("exporter before the load: %s, %s; after: %s, %s", procField(idle, "VmHWM"), procField(idle, "VmRSS"), procField(status, "VmHWM"), procField(status, "VmRSS"))
}

// scrapeGzip scrapes url as Prometheus does, gzip asked for and the
// compressed body read whole; user "" sends no credentials.
func scrapeGzip(c *http.Client, url, user, password string) (status int, n int64, err error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, n, err
}

// scrapeConcurrently runs clients goroutines, each with a client of its
// own, each scraping each times; it returns every scrape's latency,
// sorted, the bytes read and the failures.
func scrapeConcurrently(clients, each int, newClient func() *http.Client, scrape func(*http.Client) (int, int64, error)) (took []time.Duration, bytes int64, failures []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient()
			for range each {
				t0 := time.Now()
				code, n, err := scrape(c)
				d := time.Since(t0)
				mu.Lock()
				took = append(took, d)
				bytes += n
				if err != nil || code != 200 {
					failures = append(failures, fmt.Sprintf("%d %v", code, err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(took)
	return took, bytes, failures
}

// procField is one "Name:\t value" line of /proc/PID/status.
func procField(status []byte, name string) string {
	for _, l := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == name {
			return name + " " + strings.Join(strings.Fields(v), " ")
		}
	}
	return name + " unknown"
}

// selfSigned writes cert.pem and key.pem for 127.0.0.1 into dir and
// returns a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "slurmdbd_exporter load test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"cert.pem": {Type: "CERTIFICATE", Bytes: der}, "key.pem": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}
