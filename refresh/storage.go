package refresh

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// statePath is where a cluster's frozen usage is kept under StoragePath
// ("" when not kept, or when the name is not a plain file name).
func (e *Exporter) statePath(cluster string) string {
	if e.StoragePath == "" || !filepath.IsLocal(cluster) || filepath.Base(cluster) != cluster {
		return ""
	}
	return filepath.Join(e.StoragePath, cluster+".usage")
}

// restore gives a cluster's refresher the frozen usage saved by an
// earlier run: at 100k associations and a year of rollups a cold load
// sums some 15 million rows. A state that cannot be read is logged and
// left for the next save to replace: the cold load happens as without it.
func (e *Exporter) restore(cluster string, cs *clusterState) {
	path := e.statePath(cluster)
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		e.Log.Info().Str("slurm_cluster", cluster).Str("file", path).Msg("no saved usage: reading the whole history")
		return
	}
	if err == nil {
		err = cs.ref.RestoreState(bufio.NewReader(f), cluster)
		f.Close()
	}
	if err != nil {
		e.Log.Warn().Err(err).Str("slurm_cluster", cluster).Str("file", path).Msg("saved usage not used: reading the whole history")
		return
	}
	cs.restored = true
	e.Log.Info().Str("slurm_cluster", cluster).Str("file", path).Msg("saved usage restored: the first refresh checks it against the database")
}

// save writes a cluster's frozen usage when it changed since the last
// save (about once an hour, when rolled-up hours freeze): to a temporary
// file, then renamed over the last, so that a crash leaves one or the
// other whole.
func (e *Exporter) save(cluster string, cs *clusterState) {
	path := e.statePath(cluster)
	if path == "" || cs.ref.Freezes == cs.savedFreezes {
		return
	}
	err := writeAtomic(path, func(w *bufio.Writer) error { return cs.ref.SaveState(w) })
	if err != nil {
		e.Log.Warn().Err(err).Str("slurm_cluster", cluster).Str("file", path).Msg("saving usage for the next start (--storage.path)")
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
