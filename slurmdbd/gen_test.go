package slurmdbd

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// genEnd is the end of the last rolled-up hour of generated clusters.
var genEnd = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

// generated is a synthetic cluster (internal/gen) in the schema real
// slurmdbd of a release created (testdata/<schema>), on a throwaway
// server: root can write, c reads through the exporter's pool.
type generated struct {
	root  *sql.DB
	c     Cluster
	stats gen.Stats
}

func generate(t testing.TB, srv *mariadbtest.Server, schema string, cfg gen.Config) generated {
	t.Helper()
	ctx := context.Background()
	name := strings.NewReplacer(".", "_", "-", "_").Replace("gen_" + schema)
	srv.Load(name, "../testdata/"+schema+"/slurm_acct_db.sql.gz")
	root, err := sql.Open("mysql", srv.DSN("root", "", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if err := root.QueryRowContext(ctx, "SELECT name FROM cluster_table LIMIT 1").Scan(&cfg.Cluster); err != nil {
		t.Fatal(err)
	}
	cfg.End = genEnd
	st, err := gen.Fill(ctx, root, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, srv.DSN("root", "", name), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c, err := d.Cluster(ctx, cfg.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	return generated{root: root, c: c, stats: st}
}
