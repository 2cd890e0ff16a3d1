package gen

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// writeAssociations writes tree's associations into assoc_table, and its
// accounts and users into acct_table and user_table.
func (c Config) writeAssociations(ctx context.Context, db *sql.DB, tree *fairshare.Tree) error {
	lft, rgt := nestedSet(tree)
	// 23.11+ link associations by id_parent and order them by lineage
	var lineageCols int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name IN ('id_parent', 'lineage')",
		c.Cluster+"_assoc_table").Scan(&lineageCols); err != nil {
		return err
	}
	withLineage := lineageCols == 2
	rows, accts, users := assocRows(tree, lft, rgt, c.End.Unix(), withLineage)
	cols := "creation_time,mod_time,deleted,is_def,id_assoc,user,acct,`partition`,parent_acct,lft,rgt,shares,qos"
	if withLineage {
		cols += ",id_parent,lineage"
	}
	if err := insert(ctx, db, "INSERT INTO "+c.table("assoc_table")+" ("+cols+") VALUES ", rows); err != nil {
		return err
	}
	if err := insert(ctx, db, "REPLACE INTO acct_table (creation_time,mod_time,deleted,name,description,organization) VALUES ", accts); err != nil {
		return err
	}
	return insert(ctx, db, "REPLACE INTO user_table (creation_time,mod_time,deleted,name,admin_level) VALUES ", users)
}

// nestedSet is tree's lft and rgt in pre-order, as slurmdbd keeps them up
// to 23.11.
func nestedSet(tree *fairshare.Tree) (lft, rgt []int) {
	n := tree.Len()
	kids := make([][]int, n)
	for i := 1; i < n; i++ {
		p := tree.Association(i).Parent
		kids[p] = append(kids[p], i)
	}
	lft, rgt = make([]int, n), make([]int, n)
	counter := 0
	var walk func(int)
	walk = func(i int) {
		counter++
		lft[i] = counter
		for _, k := range kids[i] {
			walk(k)
		}
		counter++
		rgt[i] = counter
	}
	walk(tree.Root())
	return lft, rgt
}

// assocRows are the values of tree's rows of assoc_table (with id_parent
// and lineage if withLineage), of its accounts in acct_table and of its
// users in user_table, created at now.
func assocRows(tree *fairshare.Tree, lft, rgt []int, now int64, withLineage bool) (rows, accts, users []string) {
	n := tree.Len()
	lineage := make([]string, n)
	rows = make([]string, 0, n)
	for i := 0; i < n; i++ {
		a := tree.Association(i)
		parent, qos := "", ""
		switch {
		case a.Parent < 0:
			qos = ",1," // normal, as sacctmgr gives root; the rest inherit it
		case !a.IsUser():
			parent = tree.Association(a.Parent).Account
		}
		if a.IsUser() {
			users = append(users, fmt.Sprintf("(%d,%d,0,'%s',1)", now, now, a.User))
		} else if a.Parent >= 0 {
			accts = append(accts, fmt.Sprintf("(%d,%d,0,'%s','%s','gen')", now, now, a.Account, a.Account))
		}
		// Synthetic gives each user one association: its default
		isDef := boolInt(a.IsUser())
		row := fmt.Sprintf("(%d,%d,0,%d,%d,'%s','%s','','%s',%d,%d,%d,'%s'", now, now, isDef, i+1, a.User, a.Account, parent, lft[i], rgt[i], a.Shares, qos)
		if withLineage {
			// parents come first in Synthetic's order
			switch {
			case a.Parent < 0:
				lineage[i] = "/"
			case a.IsUser():
				lineage[i] = lineage[a.Parent] + "0-" + a.User + "/"
			default:
				lineage[i] = lineage[a.Parent] + a.Account + "/"
			}
			row += fmt.Sprintf(",%d,'%s'", a.Parent+1, lineage[i]) // id_assoc is index+1; root's parent 0
		}
		rows = append(rows, row+")")
	}
	return rows, accts, users
}
