// Package slurmdbd reads the slurmdbd MySQL/MariaDB schema, read-only. It is
// the only package of the exporter that speaks SQL. The schema is that of
// src/plugins/accounting_storage/mysql/ of SchedMD/slurm, 20.11 to 26.05;
// columns are detected, not inferred from a version number.
package slurmdbd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// DB is a pool of read-only connections to a slurmdbd database.
type DB struct {
	db *sql.DB
	// Timeout bounds every query.
	Timeout time.Duration
}

// DefaultTimeout bounds each query unless DB.Timeout says otherwise.
const DefaultTimeout = 30 * time.Second

// Open connects with the DSN (go-sql-driver/mysql syntax) and makes every
// pooled connection read-only: the driver sets the session's read-only
// transaction variable on each new connection, named tx_read_only on
// MariaDB before 11.1 and MySQL 5.x, transaction_read_only on MySQL 8 and
// MariaDB 11.1+. A SELECT grant on slurm_acct_db is all it needs.
//
// timeout (0: DefaultTimeout) bounds every query on both ends: the client
// gives up through its context, and the server stops waiting for a table
// lock (lock_wait_timeout) and stops the statement (max_statement_time on
// MariaDB, max_execution_time on MySQL). A client that gives up closes
// its connection, but the server would otherwise go on waiting behind a
// held lock, one more thread per refresh.
func Open(ctx context.Context, dsn string, timeout time.Duration) (*DB, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	params, err := sessionParams(ctx, cfg, timeout)
	if err != nil {
		return nil, err
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	maps.Copy(cfg.Params, params)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxLifetime(10 * time.Minute)
	d := &DB{db: db, Timeout: timeout}
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", cfg.Addr, err)
	}
	return d, nil
}

// LogDriver sends the MySQL driver's own messages (a connection broken
// mid-packet, say) to print: the driver writes them to stderr as plain
// lines, which broke --log.format json.
func LogDriver(print func(msg string)) {
	mysql.SetLogger(driverLog(print))
}

type driverLog func(string)

func (l driverLog) Print(v ...any) { l(strings.TrimSpace(fmt.Sprint(v...))) }

// CheckDSN says what is wrong with a DSN, without connecting: a
// configuration error, unlike a database that does not answer.
func CheckDSN(dsn string) error {
	_, err := parseDSN(dsn)
	return err
}

func parseDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's message may quote the DSN, password included.
		return nil, errors.New("database DSN: not a valid go-sql-driver/mysql DSN (user:password@tcp(host:port)/slurm_acct_db)")
	}
	if cfg.DBName == "" {
		return nil, errors.New("database DSN: no database name: expected user:password@tcp(host:port)/slurm_acct_db")
	}
	return cfg, nil
}

// The server's version, and its read-only variable under the name MySQL 8
// and MariaDB 11.1+ give it (an error on older servers).
const (
	sqlVersion  = "SELECT @@version"
	sqlReadOnly = "SELECT @@session.transaction_read_only"
)

// sessionParams are the session variables set on every connection: the
// server is asked which names it knows.
func sessionParams(ctx context.Context, cfg *mysql.Config, timeout time.Duration) (map[string]string, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var version string
	if err := db.QueryRowContext(ctx, sqlVersion).Scan(&version); err != nil {
		return nil, fmt.Errorf("database %s: %w", cfg.Addr, err)
	}
	secs := int(math.Ceil(timeout.Seconds()))
	p := map[string]string{"lock_wait_timeout": strconv.Itoa(secs)}
	if strings.Contains(version, "MariaDB") {
		p["max_statement_time"] = strconv.Itoa(secs)
	} else {
		p["max_execution_time"] = strconv.Itoa(secs * 1000)
	}
	var v sql.NullString
	err = db.QueryRowContext(ctx, sqlReadOnly).Scan(&v)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		p["transaction_read_only"] = "1"
	case errors.As(err, &me) && me.Number == 1193: // ER_UNKNOWN_SYSTEM_VARIABLE
		p["tx_read_only"] = "1"
	default:
		return nil, fmt.Errorf("database %s: %w", cfg.Addr, err)
	}
	return p, nil
}

// Close closes the pool.
func (d *DB) Close() error { return d.db.Close() }

func (d *DB) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	t := d.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeout(parent, t)
}

// query runs q under the timeout and calls scan for each row.
func (d *DB) query(ctx context.Context, what, q string, scan func(*sql.Rows) error, args ...any) error {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// clusterName is what the exporter accepts as a table-name prefix, on top
// of the name being listed in cluster_table.
var clusterName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

const sqlClusters = "SELECT `name` FROM `cluster_table` WHERE `deleted` = 0 ORDER BY `name`"

// Clusters lists the live clusters of cluster_table.
func (d *DB) Clusters(ctx context.Context) ([]string, error) {
	var names []string
	err := d.query(ctx, "reading cluster_table", sqlClusters, func(r *sql.Rows) error {
		var n string
		if err := r.Scan(&n); err != nil {
			return err
		}
		names = append(names, n)
		return nil
	})
	return names, err
}

// Cluster checks that name is a live cluster of cluster_table whose name
// is safe as a table prefix, and returns it for the per-cluster readers.
func (d *DB) Cluster(ctx context.Context, name string) (Cluster, error) {
	names, err := d.Clusters(ctx)
	if err != nil {
		return Cluster{}, err
	}
	for _, n := range names {
		if n == name {
			if !clusterName.MatchString(n) {
				return Cluster{}, fmt.Errorf("cluster %q: name not usable as a table prefix: expected letters, digits, '_' and '-'", n)
			}
			return Cluster{db: d, Name: n}, nil
		}
	}
	return Cluster{}, fmt.Errorf("cluster %q is not in cluster_table: expected one of %v", name, names)
}

// Cluster reads one cluster's tables.
type Cluster struct {
	db   *DB
	Name string
	// AllTRES reads the usage of every TRES but energy; otherwise billing
	// alone, fairshare's input. Real rollups hold a row per TRES (cpu,
	// mem, node, billing, gres/...) for every association and hour: the
	// others matter only to the per-TRES usage metrics.
	AllTRES bool
}

// tresCond is the rollup rows' TRES condition and its argument
// (usage.KeepsTRES says the same of a row).
func (c Cluster) tresCond() (string, uint32) {
	if c.AllTRES {
		return "`id_tres` <> ?", usage.TRESEnergy
	}
	return "`id_tres` = ?", usage.TRESBilling
}

// fill fills a query's per-cluster table names: %[1]s in format is the
// cluster's name, which DB.Cluster checked (letters, digits, '_' and '-'),
// inside the backticks of the format's identifiers. The further verbs take
// parts the code picks among fixed SQL (a column or its stand-in, a TRES
// condition, a period's table) or formats from integers: never a value
// read or given as text.
func (c Cluster) fill(format string, parts ...string) string {
	args := make([]any, 1, 1+len(parts))
	args[0] = c.Name
	for _, p := range parts {
		args = append(args, p)
	}
	return fmt.Sprintf(format, args...)
}

// tableName is the name of the cluster's table, as information_schema
// and messages give it; quoted is that name in backticks, as most
// messages give it.
func (c Cluster) tableName(suffix string) string { return c.Name + "_" + suffix }

func (c Cluster) quoted(suffix string) string { return "`" + c.tableName(suffix) + "`" }
