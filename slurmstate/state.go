// Package slurmstate reads the slurmctld state files the exporter uses from
// StateSaveLocation, when it runs on the head node.
package slurmstate

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
)

// LastDecayRan reads priority_last_decay_ran: the time of slurmctld's last
// decay pass and of its last usage reset (priority_multifactor.c
// _write_last_decay_ran packs both with pack_time, 8 bytes big-endian).
// The pass time gives the phase of the passes, which the database does not
// hold.
func LastDecayRan(stateDir string) (lastRan, lastReset time.Time, err error) {
	path := filepath.Join(stateDir, "priority_last_decay_ran")
	// read at every refresh: a FIFO or device in its place must not hang it
	b, _, err := regular.Read(path, 4096)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	if len(b) < 16 {
		return time.Time{}, time.Time{}, fmt.Errorf("%s: %d bytes: expected 16 (two packed times)", path, len(b))
	}
	ran := int64(binary.BigEndian.Uint64(b[0:8]))
	reset := int64(binary.BigEndian.Uint64(b[8:16]))
	if ran <= 0 || ran > 1<<40 {
		return time.Time{}, time.Time{}, fmt.Errorf("%s: last pass %d is not a plausible time", path, ran)
	}
	return time.Unix(ran, 0), time.Unix(reset, 0), nil
}
