package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/sealed"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

// statePath is where a cluster's frozen usage is kept under StoragePath
// ("" when not kept, or when the name is not a plain file name).
func (e *Engine) statePath(cluster string) string {
	return e.storageFile(cluster, ".usage")
}

// storageFile is cluster's file with suffix under StoragePath ("" when
// not kept, or when the name is not a plain file name).
func (e *Engine) storageFile(cluster, suffix string) string {
	if e.o.storagePath == "" || !filepath.IsLocal(cluster) || filepath.Base(cluster) != cluster {
		return ""
	}
	return filepath.Join(e.o.storagePath, cluster+suffix)
}

// maxPassFile bounds what a saved pass phase may be: a header and a line
// of JSON.
const maxPassFile = 4 << 10

// passFile is the saved pass phase's framing: a file that still parses
// after an edit or a torn copy would otherwise be taken for the phase the
// reads pinned. Format 1 is PassMemory in JSON; the files of before it
// (JSON alone) are refused once and replaced at the next save.
var passFile = sealed.Kind{Magic: "slurmdbd_exporter passes\n", Format: 1, What: "saved pass phase"}

// RecallPasses gives the engine's tracker the pass phase an earlier run
// kept (recallPasses).
func (e *Engine) RecallPasses() { e.recallPasses(e.o.tracker) }

// recallPasses gives the tracker the pass phase an earlier run kept for
// slurm.conf's cluster: the tracker takes it, as a belief the reads must
// confirm, if slurmctld still runs the boot it was pinned for. A file
// that cannot be read is logged and left for the next save to replace.
func (e *Engine) recallPasses(t *Tracker) {
	path := e.passesPath()
	if path == "" {
		return
	}
	e.removeTemps(e.conf.ClusterName, path)
	b, _, err := regular.Read(path, maxPassFile)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		b, err = passFile.Open(bytes.NewReader(b), maxPassFile)
	}
	var m PassMemory
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	switch {
	case errors.Is(err, sealed.ErrUnsealed):
		e.o.log.Warn().Err(err).Str("file", path).Msg("saved pass phase without a checksum (written by an older version) not used: inferring it from the reads; the next save replaces it")
		return
	case err != nil:
		e.o.log.Warn().Err(err).Str("file", path).Msg("saved pass phase not used: inferring it from the reads")
		return
	}
	t.Recall(m)
}

// passesPath is where slurm.conf's cluster's pass phase is kept ("": not
// kept).
func (e *Engine) passesPath() string { return e.storageFile(e.conf.ClusterName, ".passes") }

// ForgetPasses says why the reads dropped a recalled pass phase
// (Tracker.Dropped), if they did.
func (e *Engine) ForgetPasses() {
	if why := e.o.tracker.Dropped(); why != "" {
		e.o.log.Warn().Str("file", e.passesPath()).Str("contradicted_by", why).Msg("saved pass phase dropped: a read contradicted it; inferring the phase from the reads")
	}
}

// KeepPasses saves the pass phase the tracker pinned, when it changed
// since the last save (once per boot, in practice).
func (e *Engine) KeepPasses(m PassMemory) {
	path := e.passesPath()
	if path == "" {
		return
	}
	err := writeAtomic(path, func(w *bufio.Writer) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return passFile.Seal(w, append(b, '\n'))
	})
	if err != nil {
		e.o.log.Warn().Err(err).Str("file", path).Msg("saving the pass phase for the next start (--storage.path)")
	}
}

// restore gives a cluster's refresher the frozen usage saved by an
// earlier run: at 100k associations and a year of rollups a cold load
// sums some 15 million rows. A state that cannot be read is logged and
// left for the next save to replace: the cold load happens as without it.
// It runs when the cluster is first seen, before any save of it: the
// temporary files of saves killed before their rename are removed then.
func (e *Engine) restore(cluster string, cs *clusterState) {
	path := e.statePath(cluster)
	if path == "" {
		return
	}
	e.removeTemps(cluster, path)
	b, _, err := regular.Read(path, slurmdbd.MaxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		e.o.log.Info().Str("slurm_cluster", cluster).Str("file", path).Msg("no saved usage: reading the whole history")
		return
	}
	if err == nil {
		err = cs.ref.RestoreState(bytes.NewReader(b), cluster)
	}
	if err != nil {
		e.o.log.Warn().Err(err).Str("slurm_cluster", cluster).Str("file", path).Msg("saved usage not used: reading the whole history")
		return
	}
	e.o.log.Info().Str("slurm_cluster", cluster).Str("file", path).Msg("saved usage restored: the first refresh checks it against the database")
}

// removeTemps removes the temporary files writeAtomic left for path:
// regular files <cluster>.usage.<digits>.tmp (os.CreateTemp's random part
// is decimal).
func (e *Engine) removeTemps(cluster, path string) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		e.o.log.Warn().Err(err).Str("slurm_cluster", cluster).Msg("looking for temporary files of interrupted saves (--storage.path)")
		return
	}
	prefix := filepath.Base(path) + "."
	for _, d := range entries {
		mid, ok := strings.CutPrefix(d.Name(), prefix)
		mid, tmp := strings.CutSuffix(mid, ".tmp")
		if !ok || !tmp || mid == "" || strings.Trim(mid, "0123456789") != "" || !d.Type().IsRegular() {
			continue
		}
		name := filepath.Join(filepath.Dir(path), d.Name())
		if err := os.Remove(name); err != nil {
			e.o.log.Warn().Err(err).Str("slurm_cluster", cluster).Str("file", name).Msg("removing the temporary file of an interrupted save")
			continue
		}
		e.o.log.Info().Str("slurm_cluster", cluster).Str("file", name).Msg("removed the temporary file of an interrupted save")
	}
}

// save writes a cluster's frozen usage when it changed since the last
// save (about once an hour, when rolled-up hours freeze): to a temporary
// file, then renamed over the last, so that a crash leaves one or the
// other whole. It also says why the first refresh did not use a restored
// state, if it did not: the save replaces that state.
func (e *Engine) save(cluster string, cs *clusterState) {
	path := e.statePath(cluster)
	if path == "" {
		return
	}
	if why := cs.ref.RestoreMismatch(); why != "" {
		e.o.log.Warn().Str("slurm_cluster", cluster).Str("file", path).Str("mismatch", why).Msg("saved usage did not hold: read the whole history, the file is replaced")
	}
	if cs.ref.Freezes == cs.savedFreezes {
		return
	}
	// no context here: SaveState's queries are bounded by --db.timeout
	err := writeAtomic(path, func(w *bufio.Writer) error { return cs.ref.SaveState(context.Background(), w) })
	if err != nil {
		e.o.log.Warn().Err(err).Str("slurm_cluster", cluster).Str("file", path).Msg("saving usage for the next start (--storage.path)")
		return
	}
	cs.savedFreezes = cs.ref.Freezes
}

func writeAtomic(path string, write func(*bufio.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
