package slurmharness

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// A capture is one moment of a cluster as the exporter reads it, in a
// directory of its own: what a replay needs to compute what a live run
// computed there (check --sshare-file --at START/END
// --slurmctld.config-file, the database dump loaded). The files, each the
// real output of the command named:
const (
	// CaptureSshare is `sshare -a -l -P -m`, read between Moment.Read:
	// what the exporter reads (-m: a user's associations in several
	// partitions are told apart).
	CaptureSshare = "sshare-a-l-P-m.txt"
	// CaptureSshareJSON is `sshare -a --json` right after it (24.11 on).
	CaptureSshareJSON = "sshare-json.json"
	// CaptureConfig is `scontrol show config`: slurmctld's BOOT_TIME.
	CaptureConfig = "scontrol-show-config.txt"
	// CaptureSlurmConf is slurm.conf as the daemons read it.
	CaptureSlurmConf = "slurm.conf"
	// CaptureState holds priority_last_decay_ran, as slurmctld's
	// StateSaveLocation did.
	CaptureState = "state"
	// CaptureZone is the cluster's time zone (TZ names it): slurmdbd's
	// hours and scontrol's times are local.
	CaptureZone = "zone"
	// CaptureDump is `mariadb-dump slurm_acct_db`, gzipped.
	CaptureDump = "slurm_acct_db.sql.gz"
	// CaptureMoment is Moment as JSON.
	CaptureMoment = "moment.json"
)

// Moment says when a capture was taken and of what.
type Moment struct {
	// Read: sshare was started and had ended (unix seconds).
	Read [2]float64 `json:"read"`
	// Release is `sinfo -V`.
	Release string `json:"release"`
	// Cluster is ClusterName.
	Cluster string `json:"cluster"`
	// Dumped is when the database dump started (unix seconds; 0 in
	// captures older than it): check --database-at.
	Dumped float64 `json:"dumped,omitempty"`
}

// dumpAfter is how long after the read the dump waits: build.RecordDelay,
// after which the database holds every job end slurmctld had charged by
// the read (make end-records).
const dumpAfter = 3 * time.Second

// Capture writes the cluster as it is now to dir (created; a capture
// already there is replaced): sshare first, as close as it can be to the
// live read it stands for, then what does not change between passes.
func (c *Cluster) Capture(dir string) Moment {
	c.t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, CaptureState), 0o755); err != nil {
		c.t.Fatal(err)
	}
	write := func(name string, b []byte) {
		c.t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	start := time.Now()
	out := c.Sshare("-a", "-l", "-P", "-m")
	end := time.Now()
	write(CaptureSshare, []byte(out))
	// 22.05 has no --json; newer releases' JSON is compared with the
	// text by sshare's own tests
	if js, err := c.Run("sshare", "-a", "--json"); err == nil && strings.HasPrefix(strings.TrimSpace(js), "{") {
		write(CaptureSshareJSON, []byte(js))
	}
	write(CaptureConfig, []byte(c.MustRun("scontrol", "show", "config")))
	for _, f := range []struct{ from, to string }{
		{c.Conf, CaptureSlurmConf},
		{filepath.Join(c.StateDir(), "priority_last_decay_ran"), filepath.Join(CaptureState, "priority_last_decay_ran")},
		{c.zonePath(), CaptureZone},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			c.t.Fatalf("capture: %v", err)
		}
		write(f.to, b)
	}
	// and a moment: the moments are kept to the microsecond
	time.Sleep(time.Until(end.Add(dumpAfter + 100*time.Millisecond)))
	dumped := time.Now()
	write(CaptureDump, c.Dump())
	m := Moment{Read: [2]float64{UnixSeconds(start), UnixSeconds(end)}, Release: c.Version(), Cluster: c.Name, Dumped: UnixSeconds(dumped)}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	write(CaptureMoment, append(b, '\n'))
	return m
}

// ReadMoment reads a capture's Moment.
func ReadMoment(dir string) (Moment, error) {
	var m Moment
	b, err := os.ReadFile(filepath.Join(dir, CaptureMoment))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil && (m.Read[0] <= 0 || m.Read[1] < m.Read[0]) {
		err = fmt.Errorf("read %v: expected two moments in order", m.Read)
	}
	if err != nil {
		return m, fmt.Errorf("capture %s: %w", dir, err)
	}
	return m, nil
}

// At is the read as check's --at START/END.
func (m Moment) At() string {
	return fmt.Sprintf("%.6f/%.6f", m.Read[0], m.Read[1])
}

// Middle is the moment a live run computed for: the read's middle.
func (m Moment) Middle() time.Time {
	mid := (m.Read[0] + m.Read[1]) / 2
	return time.Unix(0, int64(mid*1e9))
}

// UnixSeconds is t as fractional unix seconds, as moments are recorded.
func UnixSeconds(t time.Time) float64 { return fairshare.Seconds(t) }

// zonePath is the file of the cluster's time zone: its own (HourAt), or
// the host's.
func (c *Cluster) zonePath() string {
	if !c.cfg.HourAt.IsZero() {
		return filepath.Join(c.Dir, zoneFile)
	}
	if tz := os.Getenv("TZ"); strings.HasPrefix(tz, "/") {
		return tz
	}
	return "/etc/localtime"
}

// Dump is the accounting database as mariadb-dump writes it, gzipped,
// without the dump's date.
func (c *Cluster) Dump() []byte {
	c.t.Helper()
	cmd := exec.Command("mariadb-dump", "--no-defaults", "-h127.0.0.1", fmt.Sprintf("-P%d", c.DB.Port), "-uroot", "--skip-dump-date", "--skip-comments", "slurm_acct_db")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	cmd.Stdout = zw
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("mariadb-dump: %v\n%s", err, stderr.Bytes())
	}
	if err := zw.Close(); err != nil {
		c.t.Fatal(err)
	}
	return gz.Bytes()
}
