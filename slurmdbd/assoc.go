package slurmdbd

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Assoc is one row of <cluster>_assoc_table.
type Assoc struct {
	ID            uint32
	User          string // empty on account rows
	Account       string
	Partition     string
	ParentAccount string // parent_acct: set on account rows only
	Shares        uint32 // fairshare.SharesParent for FairShare=parent
	// Deleted rows are kept: a removed user's usage stays with its account.
	Deleted bool
	// IDParent (23.11+) is the id_assoc of the parent row; 0 without it.
	IDParent uint32
	Lineage  string
	// Created is creation_time (unix seconds).
	Created int64
	// Priority is the association's own priority; HasPriority is false
	// when it inherits its parent's (NULL).
	Priority    uint32
	HasPriority bool
	// Err says why the row cannot be used; BuildTree leaves it out.
	Err error
}

func (a *Assoc) String() string {
	s := fmt.Sprintf("id_assoc=%d account=%q", a.ID, a.Account)
	if a.User != "" {
		s += fmt.Sprintf(" user=%q", a.User)
	}
	if a.Partition != "" {
		s += fmt.Sprintf(" partition=%q", a.Partition)
	}
	return s
}

// Associations reads every association, deleted ones included, in the
// order slurmctld keeps them, which decides Fair Tree ties: by lineage from
// 23.11 (assoc_mgr sorts by it), by lft before.
func (c Cluster) Associations(ctx context.Context, l Layout) ([]Assoc, error) {
	cols := "id_assoc, user, acct, `partition`, parent_acct, shares, deleted, creation_time, priority"
	if l.IDParent {
		cols += ", id_parent"
	} else {
		cols += ", 0"
	}
	if l.Lineage {
		cols += ", lineage"
	} else {
		cols += ", ''"
	}
	order := "id_assoc"
	switch {
	case l.Lineage:
		order = "CAST(lineage AS BINARY), id_assoc"
	case l.LftRgt:
		order = "lft, id_assoc"
	}
	q := "SELECT " + cols + " FROM " + c.table("assoc_table") + " ORDER BY " + order
	var out []Assoc
	err := c.db.query(ctx, "reading "+c.Name+"_assoc_table", q, func(r *sql.Rows) error {
		var a Assoc
		var shares, deleted int64
		var lineage sql.NullString
		var prio sql.NullInt64
		if err := r.Scan(&a.ID, &a.User, &a.Account, &a.Partition, &a.ParentAccount, &shares, &deleted, &a.Created, &prio, &a.IDParent, &lineage); err != nil {
			return err
		}
		// NO_VAL and INFINITE stand for unset too (assoc_mgr.c)
		if prio.Valid && prio.Int64 >= 0 && prio.Int64 < 0xfffffffe {
			a.Priority, a.HasPriority = uint32(prio.Int64), true
		}
		if shares < 0 || shares > int64(fairshare.SharesParent) {
			a.Err = fmt.Errorf("shares %d: expected 0 to 2147483647", shares)
		}
		a.Shares, a.Deleted, a.Lineage = uint32(shares), deleted != 0, lineage.String
		out = append(out, a)
		return nil
	})
	return out, err
}

// assocVersion tells whether the association table changed: slurmdbd
// sets mod_time on every row it adds, modifies or deletes. Stable is false
// while the newest change is too recent to be sure no other came in the
// same second after the count.
type assocVersion struct {
	count, newest int64
	stable        bool
}

// assocVersion reads it, and the server's clock: a scan of the table on
// the server, a tenth of reading it at 100k associations.
func (c Cluster) assocVersion(ctx context.Context) (v assocVersion, now int64, err error) {
	table := c.table("assoc_table")
	err = c.db.query(ctx, "reading "+table, "SELECT COUNT(*), COALESCE(MAX(mod_time), 0), UNIX_TIMESTAMP() FROM "+table, func(r *sql.Rows) error {
		return r.Scan(&v.count, &v.newest, &now)
	})
	v.stable = v.newest < now-1
	return v, now, err
}

// lastTxn is the newest id of txn_table and the server's clock: slurmdbd
// logs there every association an administrator adds, modifies or
// removes, and the primary key gives the newest at once, where
// assocVersion scans the association table (28 ms at 100k associations).
func (c Cluster) lastTxn(ctx context.Context) (id, now int64, err error) {
	err = c.db.query(ctx, "reading txn_table", "SELECT COALESCE(MAX(id), 0), UNIX_TIMESTAMP() FROM `txn_table`", func(r *sql.Rows) error {
		return r.Scan(&id, &now)
	})
	return id, now, err
}

// OrderAsSlurmctld puts rows in the order slurmctld keeps them when it
// booted at boot: the ones created by then in the database's order (lft up
// to 23.02, lineage from 23.11: how Associations returns them), then the
// ones added since, which assoc_mgr appends, by creation. Fair Tree walks
// tied siblings in this order. Measured on real 22.05: before a restart
// two tied accounts went in creation order, after it in lft order.
func OrderAsSlurmctld(rows []Assoc, boot time.Time) {
	b := boot.Unix()
	slices.SortStableFunc(rows, func(x, y Assoc) int {
		xl, yl := x.Created > b, y.Created > b
		switch {
		case !xl && !yl:
			return 0
		case xl != yl:
			if xl {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(x.Created, y.Created); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
}

// Tree is the live association tree built from assoc_table rows.
type Tree struct {
	// Assocs is parents-first, siblings in slurmctld's order; RawUsage is
	// left 0 for the caller to fill.
	Assocs []fairshare.Association
	// Row[i] is the index in the rows given to BuildTree of Assocs[i].
	Row []int
	// Problems are the rows left out, each naming the row and why.
	Problems []error
}

// BuildTree links the live rows (deleted = 0) into a tree: an account row
// under its parent_acct (or id_parent where present), a user row under the
// account row of its acct. A row whose parent is missing, or that a cycle
// cuts off from root, is left out and reported; so is a duplicate. Only a
// missing root is an error.
func BuildTree(rows []Assoc) (*Tree, error) {
	t := &Tree{}
	root := -1
	accounts := map[string]int{}
	byID := map[uint32]int{}
	type userKey struct{ user, account, partition string }
	users := map[userKey]int{}
	skip := map[int]bool{}
	for i := range rows {
		a := &rows[i]
		if a.Deleted {
			continue
		}
		if a.Err != nil {
			t.Problems = append(t.Problems, fmt.Errorf("%s: %w: left out", a, a.Err))
			skip[i] = true
			continue
		}
		byID[a.ID] = i
		if a.User != "" {
			// udex makes these unique; a damaged or hand-made table may not
			k := userKey{a.User, a.Account, a.Partition}
			if j, dup := users[k]; dup {
				t.Problems = append(t.Problems, fmt.Errorf("%s: already has row id_assoc=%d: left out", a, rows[j].ID))
				skip[i] = true
				continue
			}
			users[k] = i
			continue
		}
		if a.Account == "root" && root < 0 {
			root = i
		}
		if j, dup := accounts[a.Account]; dup {
			t.Problems = append(t.Problems, fmt.Errorf("%s: account %q already has row id_assoc=%d: left out", a, a.Account, rows[j].ID))
			continue
		}
		accounts[a.Account] = i
	}
	if root < 0 {
		return nil, fmt.Errorf("assoc_table has no live root account (acct='root', user=''): expected one")
	}
	parent := make([]int, len(rows))
	children := map[int][]int{}
	for i := range rows {
		a := &rows[i]
		parent[i] = -1
		if a.Deleted || skip[i] || i == root {
			continue
		}
		if a.User == "" && accounts[a.Account] != i {
			continue // a duplicate, reported above
		}
		p, ok := -1, false
		switch {
		case a.User != "":
			p, ok = accounts[a.Account]
		case a.IDParent != 0:
			p, ok = byID[a.IDParent]
			ok = ok && rows[p].User == ""
		default:
			p, ok = accounts[a.ParentAccount]
		}
		if !ok {
			what := "parent account " + fmt.Sprintf("%q", a.ParentAccount)
			if a.User != "" {
				what = "account row " + fmt.Sprintf("%q", a.Account)
			} else if a.IDParent != 0 {
				what = fmt.Sprintf("parent id_assoc=%d", a.IDParent)
			}
			t.Problems = append(t.Problems, fmt.Errorf("%s: %s does not exist: left out", a, what))
			continue
		}
		parent[i] = p
		children[p] = append(children[p], i)
	}
	// Depth-first from root, children in row order: parents first, and
	// siblings keep slurmctld's order. What is not reached sits on a cycle
	// or under a left-out row.
	index := make([]int, len(rows))
	for i := range index {
		index[i] = -1
	}
	stack := []int{root}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		a := &rows[i]
		index[i] = len(t.Assocs)
		p := -1
		if parent[i] >= 0 {
			p = index[parent[i]]
		}
		t.Assocs = append(t.Assocs, fairshare.Association{Account: a.Account, User: a.User, Partition: a.Partition, Parent: p, Shares: a.Shares})
		t.Row = append(t.Row, i)
		kids := children[i]
		for k := len(kids) - 1; k >= 0; k-- {
			stack = append(stack, kids[k])
		}
	}
	for i := range rows {
		if parent[i] >= 0 && index[i] < 0 {
			t.Problems = append(t.Problems, fmt.Errorf("%s: not reachable from root (a cycle in parent_acct?): left out", &rows[i]))
		}
	}
	return t, nil
}
