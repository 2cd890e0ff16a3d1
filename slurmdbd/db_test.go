package slurmdbd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

type release struct {
	name, dir, cluster string
	layout             Layout
	// alter turns a real database into an older layout (a derived test:
	// no capture of that release exists here).
	alter string
	// sameOrder: sshare lists associations in slurmctld's order (23.11+,
	// by lineage); before, it sorts them by name.
	sameOrder bool
}

// releases are real databases: full dumps taken from real slurmdbd
// (testdata/README.md says how), and layouts derived from them.
var releases = []release{
	{name: "22.05", dir: "slurm-22.05", cluster: "", layout: Layout{LftRgt: true, HourTimeIndex: true, Txn: true, Convert: 12}},
	{name: "23.11 (derived from 24.11: no acct flags, id_alt or QOS usage tables)", dir: "slurm-24.11", cluster: "v2411",
		layout: Layout{LftRgt: true, IDParent: true, Lineage: true, HourModIndex: true, Txn: true, Convert: 15}, sameOrder: true,
		// 23.11's CONVERT_VERSION is 15 (as_mysql_convert.c)
		alter: "UPDATE convert_version_table SET version = 15; ALTER TABLE acct_table DROP COLUMN flags; ALTER TABLE v2411_assoc_usage_hour_table DROP COLUMN id_alt;" +
			" DROP TABLE v2411_qos_usage_hour_table, v2411_qos_usage_day_table, v2411_qos_usage_month_table"},
	{name: "24.11", dir: "slurm-24.11", cluster: "v2411", layout: Layout{LftRgt: true, IDParent: true, Lineage: true, AcctFlags: true, IDAlt: true, QOSUsage: true, HourModIndex: true, Txn: true, Convert: 16}, sameOrder: true},
	{name: "25.11", dir: "slurm-25.11", cluster: "v2511", layout: Layout{IDParent: true, Lineage: true, AcctFlags: true, IDAlt: true, QOSUsage: true, HourModIndex: true, Txn: true, Convert: 16}, sameOrder: true},
	// no 26.05 dump here: of what 26.05.5's schema adds to job_table
	// (docs/usage.md), 25.11's lacks sluid, its index, exclusive and
	// oversubscribe; sluid is what the exporter reads
	{name: "26.05 (derived from 25.11: job_table's sluid)", dir: "slurm-25.11", cluster: "v2511",
		layout: Layout{IDParent: true, Lineage: true, AcctFlags: true, IDAlt: true, QOSUsage: true, HourModIndex: true, Txn: true, Convert: 16, HetChargedAtSubmit: true}, sameOrder: true,
		alter: "ALTER TABLE v2511_job_table ADD COLUMN `sluid` bigint unsigned DEFAULT 0 NOT NULL, ADD KEY `sluid` (`sluid`)"},
}

var dbSeq int

// openRelease loads a release and opens its cluster; db names the
// database, for changes made as root.
func openRelease(t *testing.T, srv *mariadbtest.Server, r release) (d *DB, c Cluster, db string) {
	t.Helper()
	d = loadRelease(t, srv, r)
	c, err := d.Cluster(context.Background(), r.cluster)
	if err != nil {
		t.Fatal(err)
	}
	return d, c, fmt.Sprintf("db%d", dbSeq)
}

// loadRelease loads a release's dump into a database of its own on srv and
// opens it as a SELECT-only user.
func loadRelease(t *testing.T, srv *mariadbtest.Server, r release) *DB {
	t.Helper()
	dbSeq++
	name := fmt.Sprintf("db%d", dbSeq)
	srv.Load(name, filepath.Join("..", "testdata", r.dir, "slurm_acct_db.sql.gz"))
	if r.alter != "" {
		srv.MustSQL("USE " + name + "; " + r.alter)
	}
	srv.CreateReader("reader", "s3cret", name)
	d, err := Open(context.Background(), srv.DSN("reader", "s3cret", name), 0)
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
		t.Run(r.name, func(t *testing.T) {
			d := loadRelease(t, srv, r)
			names, err := d.Clusters(ctx)
			if err != nil || len(names) != 1 || r.cluster != "" && names[0] != r.cluster {
				t.Fatalf("clusters %v, %v", names, err)
			}
			r.cluster = names[0]
			if _, err := d.Cluster(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `cluster "nope" is not in cluster_table`) {
				t.Errorf("unknown cluster: %v", err)
			}
			c, err := d.Cluster(ctx, r.cluster)
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.Layout(ctx)
			// the dumps' table_defs_table is real; its stamps are
			// the dump's moment, not part of the layout
			if l.Defined == 0 {
				t.Errorf("table_defs_table read as empty")
			}
			l.Defined = 0
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
			capture := "sshare-a-l-P.txt"
			if r.dir == "slurm-22.05" {
				capture = "idle-fairtree-m.txt"
			}
			compareWithSshare(t, tree, filepath.Join("..", "testdata", r.dir, capture), r.sameOrder)
		})
	}
	t.Run("unknown layout", func(t *testing.T) {
		r := releases[3]
		r.alter = "ALTER TABLE v2511_assoc_table DROP COLUMN shares"
		d := loadRelease(t, srv, r)
		c, err := d.Cluster(ctx, "v2511")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Layout(ctx); err == nil || !strings.Contains(err.Error(), "table v2511_assoc_table has no column shares") {
			t.Errorf("error %v, want it to name the missing column", err)
		}
	})
}

// compareWithSshare: the tree read from the database is the one sshare
// shows, with the same shares and parents; from 23.11 row for row in the
// same order (sshare lists by lineage, as slurmctld keeps siblings).
func compareWithSshare(t *testing.T, tree *Tree, file string, sameOrder bool) {
	t.Helper()
	out, err := sshare.ParseFile(file)
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
	if sameOrder {
		for i, w := range want {
			g := tree.Assocs[i]
			if g.Account != w.Account || g.User != w.User || g.Parent != w.Parent || (i > 0 && g.Shares != w.Shares) {
				t.Errorf("row %d: database %+v, sshare %+v", i, g, w)
			}
		}
	}
	type key struct{ acct, user, part string }
	describe := func(as []fairshare.Association) map[key]string {
		m := map[key]string{}
		for _, a := range as {
			parent := ""
			if a.Parent >= 0 {
				parent = as[a.Parent].Account
			}
			m[key{a.Account, a.User, a.Partition}] = fmt.Sprintf("parent %s shares %d", parent, a.Shares)
		}
		return m
	}
	g, w := describe(tree.Assocs), describe(want)
	delete(g, key{"root", "", ""}) // sshare leaves root's shares blank
	delete(w, key{"root", "", ""})
	for k, v := range w {
		if g[k] != v {
			t.Errorf("%v: database %q, sshare %q", k, g[k], v)
		}
	}
	if _, err := fairshare.NewTree(tree.Assocs); err != nil {
		t.Error(err)
	}
}

// exec runs a statement through the exporter's pool: the package itself
// has no way to write, this shows the pool would refuse.
func (d *DB) exec(ctx context.Context, stmt string) error {
	_, err := d.db.ExecContext(ctx, stmt)
	return err
}

// TestReadOnly: a SELECT-only user is enough, and the exporter's sessions
// refuse writes even for a user that could write.
func TestReadOnly(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	ctx := context.Background()
	d := loadRelease(t, srv, releases[2])
	if err := d.exec(ctx, "UPDATE acct_table SET description = 'x'"); err == nil {
		t.Error("a SELECT-only user updated acct_table")
	}
	root, err := Open(ctx, srv.DSN("root", "", fmt.Sprintf("db%d", dbSeq)), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	err = root.exec(ctx, "UPDATE acct_table SET description = 'x'")
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
		_, err := Open(ctx, tc.dsn, 0)
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
		{ID: 10, Account: "a", User: "u", Shares: 3},
		{ID: 11, Account: "a", User: "w", Err: errors.New("shares -1: expected 0 to 2147483647")},
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
		`id_assoc=10 account="a" user="u": already has row id_assoc=3: left out`,
		`id_assoc=11 account="a" user="w": shares -1: expected 0 to 2147483647: left out`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not say %q:\n%s", want, all)
		}
	}
	if _, err := BuildTree(rows[1:]); err == nil {
		t.Error("no root accepted")
	}
}

// TestQOSFactorAndJobIndex: on real 24.11 rows, a QOS UsageFactor weighs
// the rolled-up hours split per QOS; on real 25.11 rows, job_db_inx above
// 2^63 (the cluster id in its top bits) reads as a uint64.
func TestQOSFactorAndJobIndex(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	ctx := context.Background()
	d, c, db := openRelease(t, srv, releases[2]) // 24.11
	l, err := c.Layout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read := func() map[usage.Key]float64 {
		qos, err := d.QOS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := c.Usage(ctx, l, qos, usage.Hour, 0, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		m := map[usage.Key]float64{}
		for _, r := range rows {
			if r.TRES == usage.TRESEnergy {
				t.Errorf("energy row read: %+v", r)
			}
			m[usage.Key{Assoc: r.Assoc, TRES: r.TRES}] += r.AllocSecs
		}
		return m
	}
	plain := read()
	if plain[usage.Key{Assoc: 10, TRES: TRESBilling}] != 16344 {
		t.Fatalf("billing of id_assoc=10: %v, want the real row's 16344", plain[usage.Key{Assoc: 10, TRES: TRESBilling}])
	}
	srv.MustSQL("UPDATE " + db + ".qos_table SET usage_factor = 2.5 WHERE id = 1")
	weighted := read()
	for k, v := range plain {
		if weighted[k] != 2.5*v {
			t.Errorf("%+v: %v with UsageFactor 2.5, %v without", k, weighted[k], v)
		}
	}

	_, c25, _ := openRelease(t, srv, releases[3])
	jobs, err := c25.Jobs(ctx, 0, 1<<40, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 || jobs[0].Inx < 1<<63 || jobs[0].Inx>>52 != 3994 {
		t.Errorf("jobs %+v: want job_db_inx above 2^63 with cluster id 3994 in its top 12 bits", jobs)
	}
}
