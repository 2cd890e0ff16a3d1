package slurmdbd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

type release struct {
	dir, cluster string
	layout       Layout
}

// releases are real databases: full dumps taken from real slurmdbd
// (testdata/README.md says how).
var releases = []release{
	{"slurm-24.11", "v2411", Layout{LftRgt: true, IDParent: true, Lineage: true, AcctFlags: true, IDAlt: true, QOSUsage: true}},
	{"slurm-25.11", "v2511", Layout{IDParent: true, Lineage: true, AcctFlags: true, IDAlt: true, QOSUsage: true}},
}

// loadRelease loads a release's dump into its own database on srv and
// opens it as a SELECT-only user.
func loadRelease(t *testing.T, srv *mariadbtest.Server, r release) *DB {
	t.Helper()
	name := "db_" + strings.ReplaceAll(r.dir, ".", "_")
	name = strings.ReplaceAll(name, "-", "_")
	srv.Load(name, filepath.Join("..", "testdata", r.dir, "slurm_acct_db.sql.gz"))
	srv.CreateReader("reader", "s3cret", name)
	d, err := Open(context.Background(), srv.DSN("reader", "s3cret", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestReleases(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	ctx := context.Background()
	for _, r := range releases {
		t.Run(r.dir, func(t *testing.T) {
			d := loadRelease(t, srv, r)
			names, err := d.Clusters(ctx)
			if err != nil || len(names) != 1 || names[0] != r.cluster {
				t.Fatalf("clusters %v, %v", names, err)
			}
			if _, err := d.Cluster(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `cluster "nope" is not in cluster_table`) {
				t.Errorf("unknown cluster: %v", err)
			}
			c, err := d.Cluster(ctx, r.cluster)
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.Layout(ctx)
			if err != nil || l != r.layout {
				t.Fatalf("layout %+v, %v; want %+v", l, err, r.layout)
			}
			rows, err := c.Associations(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := BuildTree(rows)
			if err != nil || len(tree.Problems) > 0 {
				t.Fatalf("%v %v", err, tree.Problems)
			}
			compareWithSshare(t, tree, filepath.Join("..", "testdata", r.dir, "sshare-a-l-P.txt"))
		})
	}
}

// compareWithSshare: the tree read from the database is the one sshare
// shows, row for row in the same order (23.11+ lists by lineage, as
// slurmctld keeps siblings), with the same shares and parents.
func compareWithSshare(t *testing.T, tree *Tree, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := sshare.Parse(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := out.Associations()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(tree.Assocs) {
		t.Fatalf("%d associations in the database, %d in sshare", len(tree.Assocs), len(want))
	}
	for i, w := range want {
		g := tree.Assocs[i]
		if g.Account != w.Account || g.User != w.User || g.Parent != w.Parent || (i > 0 && g.Shares != w.Shares) {
			t.Errorf("row %d: database %+v, sshare %+v", i, g, w)
		}
	}
	if _, err := fairshare.NewTree(tree.Assocs); err != nil {
		t.Error(err)
	}
}

// TestReadOnly: a SELECT-only user is enough, and the exporter's sessions
// refuse writes even for a user that could write.
func TestReadOnly(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	ctx := context.Background()
	d := loadRelease(t, srv, releases[0])
	if err := d.Exec(ctx, "UPDATE acct_table SET description = 'x'"); err == nil {
		t.Error("a SELECT-only user updated acct_table")
	}
	root, err := Open(ctx, srv.DSN("root", "", "db_slurm_24_11"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	err = root.Exec(ctx, "UPDATE acct_table SET description = 'x'")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1792 { // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
		t.Errorf("root through the exporter's pool: %v, want error 1792 (read-only transaction)", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ dsn, want string }{
		{"not a dsn", "not a valid"},
		{"u:topsecret@tcp(127.0.0.1:1)/", "no database name"},
		{"u:topsecret@tcp(127.0.0.1:1)/slurm_acct_db", "127.0.0.1:1"},
	} {
		_, err := Open(ctx, tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%q: %v (want %q, and never the password)", tc.dsn, err, tc.want)
		}
	}
}

func TestBuildTreeProblems(t *testing.T) {
	rows := []Assoc{
		{ID: 1, Account: "root"},
		{ID: 2, Account: "a", ParentAccount: "root", Shares: 10},
		{ID: 3, Account: "a", User: "u", Shares: 1},
		{ID: 4, Account: "orphan", ParentAccount: "missing", Shares: 1},
		{ID: 5, Account: "x", ParentAccount: "y", Shares: 1},
		{ID: 6, Account: "y", ParentAccount: "x", Shares: 1},
		{ID: 7, Account: "gone", User: "v", Shares: 1},
		{ID: 8, Account: "a", ParentAccount: "root", Shares: 5},
		{ID: 9, Account: "b", ParentAccount: "root", Shares: 5, Deleted: true},
	}
	tree, err := BuildTree(rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Assocs) != 3 || tree.Assocs[2].User != "u" || tree.Assocs[2].Parent != 1 {
		t.Errorf("tree %+v", tree.Assocs)
	}
	var msgs []string
	for _, p := range tree.Problems {
		msgs = append(msgs, p.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		`id_assoc=4 account="orphan": parent account "missing" does not exist`,
		`id_assoc=5 account="x": not reachable from root`,
		`id_assoc=6 account="y": not reachable from root`,
		`id_assoc=7 account="gone" user="v": account row "gone" does not exist`,
		`id_assoc=8 account="a": account "a" already has row id_assoc=2`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not say %q:\n%s", want, all)
		}
	}
	if _, err := BuildTree(rows[1:]); err == nil {
		t.Error("no root accepted")
	}
}
