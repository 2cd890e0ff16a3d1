package slurmdbd

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/gen"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
)

// TestSteadyQueriesUseIndexes records, with MariaDB's general log, every
// statement a steady refresh sends (Refresher.Refresh after a full load,
// pending jobs, Maui windows) against a generated cluster in the real
// 22.05 schema, and runs EXPLAIN on each: none may scan a rollup table or
// the job table whole. Those grow with the site's history; a steady
// refresh must cost what changed since the last one.
func TestSteadyQueriesUseIndexes(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	// 22.05 indexes hours by time_start, 24.11 by mod_time only
	for _, schema := range []string{"slurm-22.05", "slurm-24.11"} {
		t.Run(schema, func(t *testing.T) { steadyQueriesUseIndexes(t, srv, schema) })
	}
}

func steadyQueriesUseIndexes(t *testing.T, srv *mariadbtest.Server, schema string) {
	ctx := context.Background()
	g := generate(t, srv, schema, gen.Config{Associations: 2000, Depth: 5, Months: 2, Seed: 3, JobsPerHour: 50})
	root, c, end := g.root, g.c, genEnd
	root.SetMaxOpenConns(1) // the general log is global: one session
	cluster := c.Name
	if _, err := root.ExecContext(ctx, "ANALYZE TABLE `"+cluster+"_assoc_usage_hour_table`, `"+cluster+"_job_table`"); err != nil {
		t.Fatal(err)
	}
	r := &Refresher{Cluster: c, Passes: fairshare.Passes{HalfLife: 7 * 86400, Period: 300}, Location: time.UTC}
	at := end.Add(20 * time.Minute)
	if _, err := r.Refresh(ctx, at); err != nil {
		t.Fatal(err)
	}
	if _, err := root.ExecContext(ctx, "SET GLOBAL log_output = 'TABLE'"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.ExecContext(ctx, "TRUNCATE mysql.general_log"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.ExecContext(ctx, "SET GLOBAL general_log = 1"); err != nil {
		t.Fatal(err)
	}
	r.ended.ok = false // read again after each new rollup
	s, err := r.Refresh(ctx, at.Add(5*time.Minute))
	if err == nil {
		_, err = c.PendingJobs(ctx, at)
	}
	if err == nil {
		_, _, err = c.ClusterTRES(ctx, at)
	}
	if err == nil {
		_, err = c.WindowUsage(ctx, at, 12*time.Hour, 8)
	}
	if _, err := root.ExecContext(ctx, "SET GLOBAL general_log = 0"); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Full {
		t.Fatal("the second refresh read the whole history again")
	}
	// nothing changed: the same usage to the last bit, or the exporter
	// renders every association series again (collector's digest)
	again, err := r.Refresh(ctx, at.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range again.Tree.Assocs {
		if a.RawUsage != s.Tree.Assocs[i].RawUsage {
			t.Fatalf("%s/%s: usage %v, then %v with nothing changed", a.Account, a.User, s.Tree.Assocs[i].RawUsage, a.RawUsage)
		}
	}
	rows, err := root.QueryContext(ctx, "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND argument NOT LIKE '%general_log%'")
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q)), "SELECT") {
			stmts = append(stmts, q)
		}
	}
	rows.Close()
	growing := func(table string) bool {
		return strings.Contains(table, "_usage_") || strings.HasSuffix(table, "_job_table")
	}
	checked := 0
	for _, q := range stmts {
		plan, err := explain(ctx, root, q)
		if err != nil {
			t.Errorf("EXPLAIN %s: %v", q, err)
			continue
		}
		for _, p := range plan {
			if !growing(p.table) {
				continue
			}
			checked++
			t.Logf("%s: %s via %s (%d rows)  %s", p.table, p.typ, p.key, p.rows, q)
			if p.typ == "ALL" || p.typ == "index" {
				t.Errorf("full scan (%s) of %s: %s", p.typ, p.table, q)
			}
		}
	}
	if checked < 4 {
		t.Errorf("only %d reads of rollup or job tables among %d statements: the general log missed the refresh", checked, len(stmts))
	}
}

type planRow struct {
	table, typ, key string
	rows            int64
}

func explain(ctx context.Context, db *sql.DB, q string) ([]planRow, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN "+q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []planRow
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var p planRow
		for i, c := range cols {
			switch c {
			case "table":
				p.table = vals[i].String
			case "type":
				p.typ = vals[i].String
			case "key":
				p.key = vals[i].String
			case "rows":
				for _, ch := range vals[i].String {
					p.rows = p.rows*10 + int64(ch-'0')
				}
			}
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
