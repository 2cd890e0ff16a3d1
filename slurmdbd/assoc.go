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

// sqlAssociations reads assoc_table's rows: %[2]s is id_parent or its
// stand-in 0 (before 23.11), %[3]s lineage or ”, %[4]s the order
// (assocOrder).
const sqlAssociations = "SELECT `id_assoc`, `user`, `acct`, `partition`, `parent_acct`, `shares`, `deleted`, `creation_time`, `priority`, %[2]s, %[3]s" +
	" FROM `%[1]s_assoc_table` ORDER BY %[4]s"

// assocOrder is the order slurmctld keeps associations in: by lineage from
// 23.11 (assoc_mgr sorts by it), by lft before, where the table has them.
func assocOrder(l Layout) string {
	switch {
	case l.Lineage:
		return "CAST(`lineage` AS BINARY), `id_assoc`"
	case l.LftRgt:
		return "`lft`, `id_assoc`"
	}
	return "`id_assoc`"
}

// Associations reads every association, deleted ones included, in the
// order slurmctld keeps them, which decides Fair Tree ties (assocOrder).
func (c Cluster) Associations(ctx context.Context, l Layout) ([]Assoc, error) {
	idParent, lineage := "0", "''"
	if l.IDParent {
		idParent = "`id_parent`"
	}
	if l.Lineage {
		lineage = "`lineage`"
	}
	var out []Assoc
	err := c.db.query(ctx, "reading "+c.tableName("assoc_table"), c.fill(sqlAssociations, idParent, lineage, assocOrder(l)), func(r *sql.Rows) error {
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

// sqlAssocVersion reads assocVersion and the server's clock: a scan of
// the table on the server, a tenth of reading it at 100k associations.
const sqlAssocVersion = "SELECT COUNT(*), COALESCE(MAX(`mod_time`), 0), UNIX_TIMESTAMP() FROM `%[1]s_assoc_table`"

func (c Cluster) assocVersion(ctx context.Context) (v assocVersion, now int64, err error) {
	err = c.db.query(ctx, "reading "+c.quoted("assoc_table"), c.fill(sqlAssocVersion), func(r *sql.Rows) error {
		return r.Scan(&v.count, &v.newest, &now)
	})
	v.stable = v.newest < now-1
	return v, now, err
}

// sqlLastTxn reads the newest id of txn_table and the server's clock:
// slurmdbd logs there every association an administrator adds, modifies
// or removes, and the primary key gives the newest at once, where
// assocVersion scans the association table (28 ms at 100k associations).
const sqlLastTxn = "SELECT COALESCE(MAX(`id`), 0), UNIX_TIMESTAMP() FROM `txn_table`"

func (c Cluster) lastTxn(ctx context.Context) (id, now int64, err error) {
	err = c.db.query(ctx, "reading txn_table", sqlLastTxn, func(r *sql.Rows) error {
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
	b := &treeBuilder{rows: rows, t: &Tree{}, root: -1, accounts: map[string]int{}, byID: map[uint32]int{}, skip: map[int]bool{}}
	b.index()
	if b.root < 0 {
		return nil, fmt.Errorf("assoc_table has no live root account (acct='root', user=''): expected one")
	}
	b.link()
	b.walk()
	return b.t, nil
}

// treeBuilder is BuildTree's work in progress; rows are named by index.
type treeBuilder struct {
	rows     []Assoc
	t        *Tree
	root     int
	accounts map[string]int // account rows by name
	byID     map[uint32]int
	skip     map[int]bool // rows left out
	parent   []int
	children map[int][]int
}

// index finds root and the account rows, and leaves out unusable rows and
// duplicates.
func (b *treeBuilder) index() {
	type userKey struct{ user, account, partition string }
	users := map[userKey]int{}
	for i := range b.rows {
		a := &b.rows[i]
		if a.Deleted {
			continue
		}
		if a.Err != nil {
			b.t.Problems = append(b.t.Problems, fmt.Errorf("%s: %w: left out", a, a.Err))
			b.skip[i] = true
			continue
		}
		b.byID[a.ID] = i
		if a.User != "" {
			// udex makes these unique; a damaged or hand-made table may not
			k := userKey{a.User, a.Account, a.Partition}
			if j, dup := users[k]; dup {
				b.t.Problems = append(b.t.Problems, fmt.Errorf("%s: already has row id_assoc=%d: left out", a, b.rows[j].ID))
				b.skip[i] = true
				continue
			}
			users[k] = i
			continue
		}
		if a.Account == "root" && b.root < 0 {
			b.root = i
		}
		if j, dup := b.accounts[a.Account]; dup {
			b.t.Problems = append(b.t.Problems, fmt.Errorf("%s: account %q already has row id_assoc=%d: left out", a, a.Account, b.rows[j].ID))
			continue
		}
		b.accounts[a.Account] = i
	}
}

// link finds each live row's parent row.
func (b *treeBuilder) link() {
	rows := b.rows
	b.parent, b.children = make([]int, len(rows)), map[int][]int{}
	for i := range rows {
		a := &rows[i]
		b.parent[i] = -1
		if a.Deleted || b.skip[i] || i == b.root {
			continue
		}
		if a.User == "" && b.accounts[a.Account] != i {
			continue // a duplicate, reported by index
		}
		p, ok := -1, false
		switch {
		case a.User != "":
			p, ok = b.accounts[a.Account]
		case a.IDParent != 0:
			p, ok = b.byID[a.IDParent]
			ok = ok && rows[p].User == ""
		default:
			p, ok = b.accounts[a.ParentAccount]
		}
		if !ok {
			what := "parent account " + fmt.Sprintf("%q", a.ParentAccount)
			if a.User != "" {
				what = "account row " + fmt.Sprintf("%q", a.Account)
			} else if a.IDParent != 0 {
				what = fmt.Sprintf("parent id_assoc=%d", a.IDParent)
			}
			b.t.Problems = append(b.t.Problems, fmt.Errorf("%s: %s does not exist: left out", a, what))
			continue
		}
		b.parent[i] = p
		b.children[p] = append(b.children[p], i)
	}
}

// walk goes depth-first from root, children in row order: parents first,
// and siblings keep slurmctld's order. What is not reached sits on a cycle
// or under a left-out row.
func (b *treeBuilder) walk() {
	rows, t := b.rows, b.t
	index := make([]int, len(rows))
	for i := range index {
		index[i] = -1
	}
	stack := []int{b.root}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		a := &rows[i]
		index[i] = len(t.Assocs)
		p := -1
		if b.parent[i] >= 0 {
			p = index[b.parent[i]]
		}
		t.Assocs = append(t.Assocs, fairshare.Association{Account: a.Account, User: a.User, Partition: a.Partition, Parent: p, Shares: a.Shares})
		t.Row = append(t.Row, i)
		kids := b.children[i]
		for k := len(kids) - 1; k >= 0; k-- {
			stack = append(stack, kids[k])
		}
	}
	for i := range rows {
		if b.parent[i] >= 0 && index[i] < 0 {
			t.Problems = append(t.Problems, fmt.Errorf("%s: not reachable from root (a cycle in parent_acct?): left out", &rows[i]))
		}
	}
}

// nodes maps id_assoc to the tree association that carries its usage:
// itself when live, its account for a removed user, the nearest live
// ancestor account for a removed account (Slurm 22.05+ leaf_usage).
func nodes(rows []Assoc, t *Tree) map[uint32]int {
	node := make(map[uint32]int, len(rows))
	account := map[string]int{}
	for i, r := range t.Row {
		node[rows[r].ID] = i
		if rows[r].User == "" {
			account[rows[r].Account] = i
		}
	}
	parentOf := map[string]string{}
	for _, r := range rows {
		if r.User == "" {
			parentOf[r.Account] = r.ParentAccount
		}
	}
	for _, r := range rows {
		if _, ok := node[r.ID]; ok {
			continue
		}
		name := r.Account
		if r.User == "" {
			name = r.ParentAccount
		}
		for hops := 0; name != "" && hops < 64; hops++ {
			if i, ok := account[name]; ok {
				node[r.ID] = i
				break
			}
			name = parentOf[name]
		}
	}
	return node
}
