package slurmstate

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLastDecayRan(t *testing.T) {
	dir := t.TempDir()
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[0:], 1795318958)
	binary.BigEndian.PutUint64(b[8:], 1795300000)
	if err := os.WriteFile(filepath.Join(dir, "priority_last_decay_ran"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ran, reset, err := LastDecayRan(dir)
	if err != nil || !ran.Equal(time.Unix(1795318958, 0)) || !reset.Equal(time.Unix(1795300000, 0)) {
		t.Errorf("%v %v %v", ran, reset, err)
	}
	os.WriteFile(filepath.Join(dir, "priority_last_decay_ran"), b[:9], 0o600)
	if _, _, err := LastDecayRan(dir); err == nil || !strings.Contains(err.Error(), "9 bytes: expected 16") {
		t.Errorf("short file: %v", err)
	}
	if _, _, err := LastDecayRan(filepath.Join(dir, "nope")); err == nil {
		t.Error("missing file accepted")
	}
}

// TestLastDecayRanNotRegular: a FIFO in place of the state file, read at
// every refresh, is an error at once, not a refresh that hangs.
func TestLastDecayRanNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "priority_last_decay_ran"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := LastDecayRan(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "expected a regular file") {
			t.Errorf("error %v: want a regular file expected", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still reading after 5 s")
	}
}
