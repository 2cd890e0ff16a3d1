package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// TestKillFaultMeasure (temporary, issue 30) measures what a SIGKILL of
// slurmctld loses: the cadence of assoc_usage writes, sshare before the
// kill and after the restart, what slurmctld logs; then whether scontrol
// reconfigure keeps a RawUsage=0, and what dd7c065's procedure (an older
// assoc_usage put back under a SIGTERM'd slurmctld, no job running) shows.
func TestKillFaultMeasure(t *testing.T) {
	for _, release := range []string{"22.05", "24.11", "26.05"} {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			measureKill(t, release)
		})
	}
}

type usageCkpt struct {
	ver  uint16
	at   time.Time
	raw  map[uint32]string
	size int
}

func decodeAssocUsage(b []byte) (usageCkpt, error) {
	u := usageCkpt{raw: map[uint32]string{}, size: len(b)}
	r := bytes.NewReader(b)
	var t64 int64
	if err := binary.Read(r, binary.BigEndian, &u.ver); err != nil {
		return u, err
	}
	if err := binary.Read(r, binary.BigEndian, &t64); err != nil {
		return u, err
	}
	u.at = time.Unix(t64, 0)
	str := func() (string, error) {
		var n uint32
		if err := binary.Read(r, binary.BigEndian, &n); err != nil {
			return "", err
		}
		s := make([]byte, n)
		if _, err := io.ReadFull(r, s); err != nil {
			return "", err
		}
		return strings.TrimRight(string(s), "\x00"), nil
	}
	for r.Len() > 0 {
		var id, wall uint32
		if err := binary.Read(r, binary.BigEndian, &id); err != nil {
			return u, err
		}
		raw, err := str()
		if err != nil {
			return u, err
		}
		if _, err := str(); err != nil {
			return u, err
		}
		if err := binary.Read(r, binary.BigEndian, &wall); err != nil {
			return u, err
		}
		u.raw[id] = raw
	}
	return u, nil
}

func measureKill(t *testing.T, release string) {
	c := slurmharness.Start(t, slurmharness.Config{Release: release, CPUs: 1024})
	t0 := time.Now()
	loadTwoAccounts(c)
	ids := []string{c.Submit("alice", "phys", "", 256, 1500), c.Submit("carol", "chem", "", 128, 1500)}
	c.WaitRunning(5*time.Minute, ids...)
	assocs, _ := c.SQL(fmt.Sprintf("SELECT id_assoc, acct, user FROM slurm_acct_db.`%s_assoc_table`", c.Name))
	t.Logf("associations: %q", strings.Fields(assocs))
	usageFile := filepath.Join(c.StateDir(), "assoc_usage")
	logFile := filepath.Join(c.Dir, "slurmctld.log")
	sshare := func() string {
		out, err := c.Run("sshare", "-n", "-P", "-a", "-o", "Account,User,RawUsage")
		if err != nil {
			return err.Error()
		}
		return strings.Join(strings.Fields(out), " ")
	}
	rel := func(tm time.Time) string { return fmt.Sprintf("%+.0fs", tm.Sub(t0).Seconds()) }
	var lastMtime time.Time
	ckpt := func(why string) (changed bool) {
		fi, err := os.Stat(usageFile)
		if err != nil {
			t.Logf("%s: assoc_usage: %v", why, err)
			return false
		}
		if fi.ModTime().Equal(lastMtime) {
			return false
		}
		lastMtime = fi.ModTime()
		b, _ := os.ReadFile(usageFile)
		u, err := decodeAssocUsage(b)
		t.Logf("%s: assoc_usage written at %s (mtime), header time %s, ver %d, %d bytes, raw %v (err %v); sshare now: %s",
			why, rel(fi.ModTime()), rel(u.at), u.ver, u.size, u.raw, err, sshare())
		return true
	}
	logFrom := func() int64 {
		fi, err := os.Stat(logFile)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	logSince := func(from int64, keys ...string) {
		b, _ := os.ReadFile(logFile)
		if int64(len(b)) < from {
			from = 0
		}
		var out []string
		for _, l := range strings.Split(string(b[from:]), "\n") {
			for _, k := range keys {
				if strings.Contains(strings.ToLower(l), strings.ToLower(k)) {
					out = append(out, l)
					break
				}
			}
		}
		if len(out) > 40 {
			out = out[:40]
		}
		t.Logf("slurmctld.log:\n%s", strings.Join(out, "\n"))
	}
	ckpt("start")

	// 1. cadence: watch for 6 minutes and until a checkpoint of this slurmctld
	pass := c.LastDecayRan()
	seen := 0
	for time.Since(t0) < 6*time.Minute || seen == 0 {
		if time.Since(t0) > 12*time.Minute {
			t.Fatalf("no assoc_usage checkpoint in 12 minutes")
		}
		if ckpt("watch") {
			seen++
		}
		if cur := c.LastDecayRan(); string(cur) != string(pass) {
			pass = cur
			t.Logf("pass at %s: sshare %s", rel(trueLastPass(c)), sshare())
		}
		time.Sleep(2 * time.Second)
	}

	// 2. two passes after the checkpoint, then SIGKILL
	c.WaitDecayPass()
	c.WaitDecayPass()
	time.Sleep(3 * time.Second)
	ckpt("before kill")
	before := sshare()
	from := logFrom()
	killed := time.Now()
	t.Logf("kill at %s, last pass %s, checkpoint mtime %s; sshare before: %s", rel(killed), rel(trueLastPass(c)), rel(lastMtime), before)
	c.KillCtld()
	t.Logf("restarted after %v; sshare at once: %s; last pass %s", time.Since(killed).Round(time.Second), sshare(), rel(trueLastPass(c)))
	ckpt("after restart")
	c.WaitDecayPass()
	t.Logf("first pass after restart at %s: sshare %s", rel(trueLastPass(c)), sshare())
	c.WaitDecayPass()
	t.Logf("second pass after restart at %s: sshare %s", rel(trueLastPass(c)), sshare())
	ckpt("after passes")
	logSince(from, "assoc", "usage", "recover", "started", "decay", "saving", "error", "primary")
	t.Logf("jobs: %v", c.JobStates())

	// 3. RawUsage=0 on carol, then scontrol reconfigure
	c.Sacctmgr("modify", "user", "where", "name=carol", "account=chem", "set", "RawUsage=0")
	time.Sleep(2 * time.Second)
	t.Logf("RawUsage=0 carol: sshare %s", sshare())
	boot := func() string {
		out, _ := c.Run("scontrol", "show", "config")
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "BOOT_TIME" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	b0 := boot()
	from = logFrom()
	reconf := time.Now()
	c.MustRun("scontrol", "reconfigure")
	for b := boot(); (b == b0 || b == "") && time.Since(reconf) < 90*time.Second; b = boot() {
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second)
	t.Logf("reconfigure: boot %s -> %s after %v; sshare %s", b0, boot(), time.Since(reconf).Round(time.Second), sshare())
	ckpt("after reconfigure")
	c.WaitDecayPass()
	t.Logf("pass after reconfigure: sshare %s", sshare())
	logSince(from, "assoc", "usage", "recover", "started", "saving", "error", "reconfig", "relinquish", "semaphore")

	// 4. dd7c065's procedure with no job running
	c.MustRun("scancel", ids...)
	c.WaitGone(2*time.Minute, ids...)
	c.WaitDecayPass()
	ckpt("dd7c065 copy")
	copied, err := os.ReadFile(usageFile)
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := decodeAssocUsage(copied)
	t.Logf("dd7c065: copied assoc_usage (header %s): %v; sshare %s", rel(cu.at), cu.raw, sshare())
	c.WaitDecayPass()
	c.WaitDecayPass()
	time.Sleep(3 * time.Second)
	t.Logf("dd7c065: before SIGTERM: sshare %s", sshare())
	from = logFrom()
	c.StopDaemon("slurmctld")
	ckpt("dd7c065 after SIGTERM")
	if err := os.WriteFile(usageFile, copied, 0o600); err != nil {
		t.Fatal(err)
	}
	c.RestartCtld("")
	t.Logf("dd7c065: restarted: sshare %s", sshare())
	c.WaitDecayPass()
	t.Logf("dd7c065: first pass after: sshare %s", sshare())
	logSince(from, "assoc", "usage", "recover", "saving", "error")
}
