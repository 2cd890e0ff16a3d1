package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TestStorageChecked: a state file (--storage.path) is used only when it
// is the one the exporter wrote, for this database. One byte of a saved
// value changed, a truncated file, a FIFO, a link to a device, a file
// past MaxStateFile, or the state of another database holding a cluster
// of the same name: a warning naming the file and what is wrong, usage
// equal to a fresh exporter's (the whole history read), the file replaced
// by one the next start restores. Temporary files of interrupted saves
// are removed at start, and a link to a state file is followed.
func TestStorageChecked(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	dsn := storageDB(t, srv, "a", "")
	// another database with a cluster v2411: created at another time, and
	// with other usage, all of it written before the state was saved
	other := storageDB(t, srv, "b", "UPDATE cluster_table SET creation_time = creation_time + 86400; UPDATE v2411_assoc_usage_hour_table SET alloc_secs = alloc_secs * 3")
	fresh := map[string]map[string]float64{}
	for _, d := range []string{dsn, other} {
		e, _ := storageExporter(t, d, "")
		fresh[d] = usageAt(t, e)
	}

	for _, c := range []struct {
		name string
		// change makes a saved state file bad (dsn: what the restarted
		// exporter reads); want is in the warning
		change func(t *testing.T, path string) (dsn string)
		want   string
	}{
		{"a value changed", func(t *testing.T, path string) string { flipValue(t, path); return dsn }, "changed since it was written"},
		{"truncated", func(t *testing.T, path string) string {
			fi, err := os.Stat(path)
			if err == nil {
				err = os.Truncate(path, fi.Size()/2)
			}
			must(t, err)
			return dsn
		}, "saved usage truncated"},
		{"a FIFO", func(t *testing.T, path string) string {
			must(t, os.Remove(path))
			must(t, syscall.Mkfifo(path, 0o600))
			t.Cleanup(func() { // a reader blocked in open gets EOF
				if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
			return dsn
		}, "is a named pipe (FIFO): expected a regular file"},
		{"a link to a device", func(t *testing.T, path string) string {
			must(t, os.Remove(path))
			must(t, os.Symlink("/dev/zero", path))
			return dsn
		}, "is a device: expected a regular file"},
		{"past MaxStateFile", func(t *testing.T, path string) string {
			must(t, os.Truncate(path, slurmdbd.MaxStateFile+1)) // sparse
			return dsn
		}, fmt.Sprintf("has %d bytes: expected at most %d", slurmdbd.MaxStateFile+1, slurmdbd.MaxStateFile)},
		{"another database's", func(t *testing.T, path string) string { return other }, "cluster_table.creation_time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "v2411.usage")
			first, _ := storageExporter(t, dsn, dir)
			usageAt(t, first)
			d := c.change(t, path)
			e, logs := storageExporter(t, d, dir)
			sameUsage(t, usageAt(t, e), fresh[d])
			if !warned(logs, path, c.want) {
				t.Errorf("no warning naming %s and saying %q:\n%s", path, c.want, logs)
			}
			next, logs := storageExporter(t, d, dir)
			sameUsage(t, usageAt(t, next), fresh[d])
			if next.clusters["v2411"].ref.FullLoads != 0 || warned(logs, path, "") {
				t.Errorf("the state saved after the fault not used:\n%s", logs)
			}
		})
	}

	t.Run("temporary files and links", func(t *testing.T) {
		dir, elsewhere := t.TempDir(), t.TempDir()
		first, _ := storageExporter(t, dsn, elsewhere)
		usageAt(t, first)
		must(t, os.Symlink(filepath.Join(elsewhere, "v2411.usage"), filepath.Join(dir, "v2411.usage")))
		stale := []string{"v2411.usage.2316354829.tmp", "v2411.usage.1.tmp"}
		kept := []string{"v2411.usage.tmp", "v2411.usage.x1.tmp", "v2411.usage.1.tmp~", "42.tmp", "v2411.usage.1", "v2511.usage.1.tmp"}
		for _, n := range append(stale, kept...) {
			must(t, os.WriteFile(filepath.Join(dir, n), []byte("interrupted"), 0o600))
		}
		e, logs := storageExporter(t, dsn, dir)
		sameUsage(t, usageAt(t, e), fresh[dsn])
		if e.clusters["v2411"].ref.FullLoads != 0 {
			t.Errorf("a link to a state file not followed:\n%s", logs)
		}
		for _, n := range stale {
			if _, err := os.Lstat(filepath.Join(dir, n)); err == nil || !strings.Contains(logs.String(), n) {
				t.Errorf("%s: not removed at start, or not logged", n)
			}
		}
		for _, n := range kept {
			if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
				t.Errorf("%s, not a temporary file of v2411.usage: %v", n, err)
			}
		}
	})
}

// storageDB loads the 24.11 capture into db, with a day of hours below the
// re-read window (what the frozen sums hold) and change, and gives a
// SELECT-only DSN for it.
func storageDB(t *testing.T, srv *mariadbtest.Server, db, change string) string {
	srv.Load(db, filepath.Join("..", "testdata", "slurm-24.11", "slurm_acct_db.sql.gz"))
	var rows []string
	for h := int64(7); h <= 30; h++ {
		start := int64(1795320000) - h*3600
		rows = append(rows, fmt.Sprintf("(%d,%d,0,10,0,5,%d,%d)", start+3600, start+3600, start, 1000*h))
	}
	srv.MustSQL("USE " + db + "; INSERT INTO v2411_assoc_usage_hour_table VALUES " + strings.Join(rows, ",") + "; " + change)
	srv.CreateReader("reader", "s3cret", db)
	return srv.DSN("reader", "s3cret", db)
}

// storageExporter is an engine of cluster v2411 keeping its state in dir
// ("": none), and its log.
func storageExporter(t *testing.T, dsn, dir string) (*Engine, *bytes.Buffer) {
	t.Helper()
	conf, err := slurmconf.Load(fstest.MapFS{"slurm.conf": {Data: []byte("ClusterName=v2411\nPriorityType=priority/multifactor\nPriorityDecayHalfLife=7-0\nPriorityCalcPeriod=1\n")}}, "slurm.conf")
	must(t, err)
	logs := &bytes.Buffer{}
	e := New(conf, dsn, WithStorage(dir), WithLogger(zerolog.New(logs)))
	t.Cleanup(e.Close)
	return e, logs
}

// usageAt is each association's usage after a refresh of e at one moment
// (after the capture's last rollup), which must end within 10 s: nothing
// in the storage directory may hang it.
func usageAt(t *testing.T, e *Engine) map[string]float64 {
	t.Helper()
	done := make(chan *build.Inputs, 1)
	go func() {
		in, err := e.Refresh(context.Background(), "v2411", time.Unix(1795320600, 0))
		if err != nil {
			t.Error(err)
		}
		done <- in
	}()
	var in *build.Inputs
	select {
	case in = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("refresh not done within 10 s")
	}
	if in == nil {
		t.Fatal("refresh failed")
	}
	m := map[string]float64{}
	for i := range in.Tree.Len() {
		a := in.Tree.Association(i)
		m[a.Account+"/"+a.User+"/"+a.Partition] = a.RawUsage
	}
	return m
}

// warned says whether logs hold a warning about file path whose error or
// mismatch says want.
func warned(logs *bytes.Buffer, path, want string) bool {
	for line := range strings.Lines(logs.String()) {
		var l struct{ Level, File, Error, Mismatch string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "warn" && l.File == path && strings.Contains(l.Error+l.Mismatch, want) {
			return true
		}
	}
	return false
}

func sameUsage(t *testing.T, got, want map[string]float64) {
	t.Helper()
	nonzero := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9*math.Max(1, w) {
			t.Errorf("%s: usage %v, a fresh exporter's %v", k, g, w)
		}
		if w > 0 {
			nonzero++
		}
	}
	if len(got) != len(want) || nonzero == 0 {
		t.Errorf("%d associations, a fresh exporter's %d, %d of them with usage", len(got), len(want), nonzero)
	}
}

// flipValue changes one bit of the exponent of the largest value saved in
// the state file at path, in place: a state that still decodes.
func flipValue(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	// the gob is where it decodes, after any header
	var s struct{ Frozen map[usage.Key]float64 }
	for off := 0; off < len(b) && len(s.Frozen) == 0; off++ {
		gob.NewDecoder(bytes.NewReader(b[off:])).Decode(&s)
	}
	var v float64
	for _, f := range s.Frozen {
		v = max(v, f)
	}
	// encoding/gob writes a float's bits byte-reversed, as an unsigned
	// integer: a negated byte count, then the bytes, exponent last
	enc := bytes.TrimLeft(binary.BigEndian.AppendUint64(nil, bits.ReverseBytes64(math.Float64bits(v))), "\x00")
	enc = append([]byte{byte(-len(enc))}, enc...)
	at := bytes.Index(b, enc)
	if v < 1 || at < 0 {
		t.Fatalf("%s: largest saved value %v not found", path, v)
	}
	b[at+len(enc)-1] ^= 1 // v * 2^±16
	must(t, os.WriteFile(path, b, 0o600))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
