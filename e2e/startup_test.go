package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultSilentDatabase: a database that accepts connections and never
// answers. serve listens at once (before, it did not listen for
// --db.timeout), /-/healthy answers, /metrics says the database is down
// and /-/ready is 503.
func TestFaultSilentDatabase(t *testing.T) {
	t.Parallel()
	var held []net.Conn // never written to, kept from the finalizer that would close them
	args := standInDatabase(t, func(c net.Conn) { held = append(held, c) })
	t0 := time.Now()
	s := startServeUntil(t, "/-/healthy", os.Environ(), append(args, "--db.timeout", "60s", "--reported.source", "none")...)
	if took := time.Since(t0); took > 20*time.Second {
		t.Errorf("/-/healthy answered after %v: expected at once, not after --db.timeout (60 s)", took)
	}
	m, _ := s.scrape()
	if v, ok := m[upDB]; !ok || v != 0 {
		t.Errorf("up{source=\"db\"} %v (present %v): expected 0 while the database does not answer", v, ok)
	}
	resp, err := httpClient.Get(s.url + "/-/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/-/ready %d: expected 503 before any data", resp.StatusCode)
	}
}

// TestFaultClusterWithoutTables: cluster_table lists a cluster whose tables
// do not exist. It is reported (cluster_up 0, one warning however many
// refreshes) and neither holds up{source="db"} at 0 nor keeps /-/ready at
// 503: the other cluster is exported.
func TestFaultClusterWithoutTables(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	f.srv.MustSQL("INSERT INTO slurm_acct_db.cluster_table (creation_time, name, federation, fed_state) VALUES (1, 'ghost', '', 0)")
	s := f.serve("--reported.source", "none", "--refresh-interval", "1s")
	// several refreshes: the last success moves twice more (it would
	// not if the cluster without tables failed them)
	m := s.waitGoodRefreshes("good refreshes (the cluster without tables must not fail them)", 2)
	up := func(c string) string { return series("slurmdbd_exporter_cluster_up", "slurm_cluster", c) }
	if m[upDB] != 1 || m[up("v2411")] != 1 || m[up("ghost")] != 0 {
		t.Errorf("up{db} %v, cluster_up{v2411} %v, cluster_up{ghost} %v: expected 1, 1, 0", m[upDB], m[up("v2411")], m[up("ghost")])
	}
	if _, ok := m[up("ghost")]; !ok {
		t.Error("no cluster_up{slurm_cluster=\"ghost\"}")
	}
	if n := strings.Count(s.logs.String(), "table ghost_assoc_table does not exist"); n != 1 {
		t.Errorf("the missing tables warned %d times: expected once", n)
	}
}

// TestFaultGrantMissing: a database user that may read every table but
// one is told which table and which grant, not that the schema is not
// one the exporter knows.
func TestFaultGrantMissing(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t)
	tables := strings.Fields(f.srv.MustSQL("SELECT table_name FROM information_schema.tables WHERE table_schema = 'slurm_acct_db'"))
	for _, host := range []string{"localhost", "127.0.0.1"} {
		f.srv.MustSQL("REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'exporter'@'" + host + "'")
		for _, tb := range tables {
			if tb != "v2411_assoc_usage_hour_table" {
				f.srv.MustSQL("GRANT SELECT ON slurm_acct_db." + tb + " TO 'exporter'@'" + host + "'")
			}
		}
	}
	s := f.serveUntil("/-/healthy", "--reported.source", "none", "--refresh-interval", "1s")
	// judged after two failed refreshes, as many as 2 s gave an idle
	// machine, and once the log says why (or 30 s have passed)
	s.waitScrape("two failed refreshes", 30*time.Second, func(m map[string]float64) bool { return dbFailures(m) >= 2 })
	want := "may not read table v2411_assoc_usage_hour_table: expected GRANT SELECT"
	s.waitLog(30*time.Second, func(log string) bool { return strings.Contains(log, want) })
	if !strings.Contains(s.logs.String(), want) {
		t.Errorf("log does not say %q", want)
	}
	if strings.Contains(s.logs.String(), "not a slurmdbd schema") {
		t.Error("a missing grant reported as an unknown schema")
	}
}

// TestFaultHangup: SIGHUP is logged, not the end of the process (it was:
// exit 129).
func TestFaultHangup(t *testing.T) {
	t.Parallel()
	s := startServe(t, os.Environ(), "--demo")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// judged once the signal is handled: logged (or 30 s have passed)
	logged := s.waitLog(30*time.Second, func(log string) bool { return strings.Contains(log, "SIGHUP") })
	resp, err := httpClient.Get(s.url + "/-/healthy")
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if !logged {
		t.Error("SIGHUP not logged")
	}
}

// TestFaultDriverLogJSON: the MySQL driver's own messages (here, a
// server that sends half a packet and hangs up) go through the
// exporter's logger: with --log.format json every line of its log is a
// JSON object. Before, the driver wrote "[mysql] packets.go:58 unexpected
// EOF" between them.
func TestFaultDriverLogJSON(t *testing.T) {
	t.Parallel()
	args := standInDatabase(t, func(c net.Conn) {
		c.Write([]byte{0x4a, 0x00}) // two bytes of a four-byte header
		c.Close()
	})
	s := startServeUntil(t, "/-/healthy", os.Environ(), append(args, "--refresh-interval", "1s", "--reported.source", "none")...)
	// judged once the driver has said something (or 30 s have passed)
	s.waitLog(30*time.Second, func(log string) bool { return strings.Contains(log, `"component":"mysql driver"`) })
	s.stop()
	driver := 0
	for _, line := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("not JSON: %q", line)
		}
		if v["component"] == "mysql driver" {
			driver++
		}
	}
	if driver == 0 {
		t.Error("no message of the driver logged: the test no longer provokes one")
	}
}

// standInDatabase starts a stand-in for MariaDB on a port of its own,
// which hands each connection to handle, and gives serve's flags for it:
// a DSN file naming it and a slurm.conf.
func standInDatabase(t *testing.T, handle func(net.Conn)) []string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=c\nPriorityType=priority/multifactor\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--dsn-file", writeDSN(t, "exporter:pw@tcp("+l.Addr().String()+")/slurm_acct_db"), "--slurm-conf", conf}
}
