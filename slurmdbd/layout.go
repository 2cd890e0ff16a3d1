package slurmdbd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// ErrNoTables: cluster_table lists a cluster whose tables do not exist (one
// registered with slurmdbd and never used, or whose tables were dropped).
var ErrNoTables = errors.New("no tables of its own")

// sqlProbe reads nothing of a cluster's table (%[2]s: one of the suffixes
// of required), for the error it may give.
const sqlProbe = "SELECT 1 FROM `%[1]s_%[2]s` LIMIT 0"

// unreadable says why information_schema showed no column of the
// cluster's table: it does not exist, or the database user may not read
// it (information_schema lists only what the user can read).
func (c Cluster) unreadable(ctx context.Context, suffix string) error {
	name := c.tableName(suffix)
	err := c.db.query(ctx, "reading "+name, c.fill(sqlProbe, suffix), func(*sql.Rows) error { return nil })
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1146: // ER_NO_SUCH_TABLE
		return fmt.Errorf("cluster %s: %w: table %s does not exist", c.Name, ErrNoTables, name)
	case errors.As(err, &me) && (me.Number == 1142 || me.Number == 1143): // ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR
		return fmt.Errorf("cluster %s: the database user may not read table %s: expected GRANT SELECT ON <slurm_acct_db>.* TO the exporter's user (packaging/grant.sql)", c.Name, name)
	case err != nil:
		return err
	}
	return fmt.Errorf("cluster %s: table %s shows no column to the database user: expected GRANT SELECT on the whole table (packaging/grant.sql)", c.Name, name)
}

// Layout says which optional columns and tables a cluster's schema has.
type Layout struct {
	// LftRgt: the nested set, maintained up to 23.11, left at 0 for new
	// rows by 24.11, dropped in 25.05.
	LftRgt bool
	// IDParent and Lineage: 23.11+.
	IDParent, Lineage bool
	// AcctFlags: acct_table.flags, 24.05+.
	AcctFlags bool
	// IDAlt: id_alt in the usage tables, 24.11+.
	IDAlt bool
	// QOSUsage: <cluster>_qos_usage_{hour,day,month}_table, 24.11+.
	QOSUsage bool
	// HourTimeIndex: an index of the hour table starts with time_start
	// (22.05); HourModIndex: one starts with mod_time (archive_purge,
	// 24.11+, which have no time_start index).
	HourTimeIndex, HourModIndex bool
	// Convert is convert_version_table's version: slurmdbd raises it when
	// it converts the database to a new release's schema (0: no table).
	// Defined is table_defs_table's latest mod_time: slurmdbd stamps a
	// table's row there whenever its start changes the table's
	// definition, with a conversion or without one (24.05 added
	// acct_table.flags at 23.11's version 15; 0: no table).
	Convert, Defined int64
	// Txn: txn_table, where slurmdbd logs every change an administrator
	// makes (sacctmgr), associations included.
	Txn bool
	// HetChargedAtSubmit: slurmctld charges each heterogeneous-job
	// component at its submission, as if it had run from the last decay
	// pass to then (26.05+ with limits enforced: proc_req.c
	// _het_job_val_rem calls acct_policy_job_fini, hence
	// priority_p_job_end, on the pending components). Nothing in the
	// database records that charge or slurmctld's release; job_table's
	// sluid arrived in the same release (26.05.0rc1), so the schema
	// tells it. Not while slurmctld is older than a 26.05 slurmdbd
	// (slurmdbd is upgraded first): then the rebuild is above slurmctld
	// by those charges until slurmctld is upgraded too.
	HetChargedAtSubmit bool
}

// required columns per table suffix ("" for global tables).
var required = map[string][]string{
	"assoc_table":            {"id_assoc", "user", "acct", "partition", "parent_acct", "shares", "deleted"},
	"assoc_usage_hour_table": {"id", "id_tres", "time_start", "alloc_secs"},
	"last_ran_table":         {"hourly_rollup", "daily_rollup", "monthly_rollup"},
	"job_table":              {"job_db_inx", "id_job", "partition", "id_assoc", "id_qos", "time_start", "time_end", "tres_alloc", "deleted"},
}

const sqlColumns = "SELECT `table_name`, `column_name` FROM `information_schema`.`columns` WHERE `table_schema` = DATABASE() AND `table_name` IN (?, ?, ?, ?, ?, ?, ?)"

// hoursByModTime: the hour table is indexed by mod_time and not by
// time_start (24.11+). slurmdbd sets mod_time when it rolls an hour up,
// after the hour (a later re-roll only makes it younger), so an hour that
// starts at t or later has mod_time >= t + 1 h.
func (l Layout) hoursByModTime() bool { return !l.HourTimeIndex && l.HourModIndex }

// sqlIndexes lists the first column of each index of a table.
const sqlIndexes = "SELECT `column_name` FROM `information_schema`.`statistics` WHERE `table_schema` = DATABASE() AND `table_name` = ? AND `seq_in_index` = 1"

// Layout detects the cluster's schema and fails, naming the column, when
// one the exporter needs is missing.
func (c Cluster) Layout(ctx context.Context) (Layout, error) {
	tables := []string{"assoc_table", "assoc_usage_hour_table", "last_ran_table", "job_table", "qos_usage_hour_table"}
	args := []any{"acct_table", "txn_table"}
	for _, t := range tables {
		args = append(args, c.tableName(t))
	}
	cols := map[string]map[string]bool{}
	err := c.db.query(ctx, "reading information_schema.columns", sqlColumns, func(r *sql.Rows) error {
		var t, col string
		if err := r.Scan(&t, &col); err != nil {
			return err
		}
		t = strings.TrimPrefix(t, c.Name+"_")
		if cols[t] == nil {
			cols[t] = map[string]bool{}
		}
		cols[t][strings.ToLower(col)] = true
		return nil
	}, args...)
	if err != nil {
		return Layout{}, err
	}
	for _, t := range slices.Sorted(maps.Keys(required)) {
		need := required[t]
		if cols[t] == nil {
			return Layout{}, c.unreadable(ctx, t)
		}
		for _, col := range need {
			if !cols[t][col] {
				return Layout{}, fmt.Errorf("cluster %s: table %s_%s has no column %s: not a slurmdbd schema this exporter knows (20.11 to 26.05)", c.Name, c.Name, t, col)
			}
		}
	}
	var timeIndex, modIndex bool
	err = c.db.query(ctx, "reading information_schema.statistics", sqlIndexes, func(r *sql.Rows) error {
		var col string
		if err := r.Scan(&col); err != nil {
			return err
		}
		timeIndex = timeIndex || strings.EqualFold(col, "time_start")
		modIndex = modIndex || strings.EqualFold(col, "mod_time")
		return nil
	}, c.Name+"_assoc_usage_hour_table")
	if err != nil {
		return Layout{}, err
	}
	mark, err := c.schemaMark(ctx)
	if err != nil {
		return Layout{}, err
	}
	a := cols["assoc_table"]
	return Layout{
		Convert: mark.convert, Defined: mark.defined,
		HourTimeIndex: timeIndex, HourModIndex: modIndex,
		LftRgt:             a["lft"] && a["rgt"],
		IDParent:           a["id_parent"],
		Lineage:            a["lineage"],
		AcctFlags:          cols["acct_table"]["flags"],
		IDAlt:              cols["assoc_usage_hour_table"]["id_alt"],
		QOSUsage:           cols["qos_usage_hour_table"]["id_alt"],
		Txn:                cols["txn_table"]["id"],
		HetChargedAtSubmit: cols["job_table"]["sluid"],
	}, nil
}

// schemaMark is what slurmdbd changes when its start changes the schema
// (Layout.Convert, Layout.Defined): read at every refresh, it tells an
// upgrade of slurmdbd at once, where a look at information_schema costs
// more.
type schemaMark struct{ convert, defined int64 }

func (m schemaMark) of(l Layout) bool { return m == schemaMark{l.Convert, l.Defined} }

const (
	sqlConvertVersion = "SELECT COALESCE(MAX(`version`), 0) FROM `convert_version_table`"
	sqlTableDefs      = "SELECT COALESCE(MAX(`mod_time`), 0) FROM `table_defs_table`"
)

func (c Cluster) schemaMark(ctx context.Context) (schemaMark, error) {
	var m schemaMark
	for _, q := range []struct {
		what, sql string
		v         *int64
	}{{"reading convert_version_table", sqlConvertVersion, &m.convert}, {"reading table_defs_table", sqlTableDefs, &m.defined}} {
		err := c.db.query(ctx, q.what, q.sql, func(r *sql.Rows) error { return r.Scan(q.v) })
		var me *mysql.MySQLError
		if err != nil && !(errors.As(err, &me) && me.Number == 1146) { // ER_NO_SUCH_TABLE: 0
			return m, err
		}
	}
	return m, nil
}
