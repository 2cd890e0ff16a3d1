package drift

import (
	"fmt"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// oneEach refuses a report with a row that may be more than one of the
// database's associations (t), which matching would have to guess
// between. Without sshare's Partition column (-m) a user's associations in
// one account and several partitions print alike, so every row of such a
// user is ambiguous; a row whose key names no association but whose
// partition is blank may be any of the user's in that account.
func oneEach(out *shares.Table, t *fairshare.Tree) error {
	if inOrder(out, t) {
		return nil
	}
	// counts first: serve checks every report, and names are needed only
	// for the rows refused
	byKey, byUser := map[result.AssocKey]int{}, map[result.AssocKey]int{}
	for i := range t.Len() {
		a := t.Association(i)
		byKey[result.KeyOf(a.Account, a.User, a.Partition)]++
		if a.User != "" {
			byUser[result.KeyOf(a.Account, a.User, "")]++
		}
	}
	partitions := out.Has(shares.Partition)
	var bad []string
	for i := range out.Rows {
		r := &out.Rows[i]
		k := result.KeyOf(r.Account, r.User, r.Partition)
		n := byKey[k]
		if r.User != "" && r.Partition == "" && (!partitions || n == 0) {
			k = result.KeyOf(r.Account, r.User, "")
			n = byUser[k]
		}
		if n > 1 {
			bad = append(bad, fmt.Sprintf("line %d (account %q, user %q, partition %q) may be any of %s", r.Line, r.Account, r.User, r.Partition, strings.Join(candidates(t, k), ", ")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	const most = 10
	more := ""
	if len(bad) > most {
		more, bad = fmt.Sprintf("; and %d more", len(bad)-most), bad[:most]
	}
	return fmt.Errorf("the report's rows do not each name one association of the database (account/user/partition): %s%s: expected a listing with the partition, 'sshare -a -l -P -m' or 'sshare --json -a'",
		strings.Join(bad, "; "), more)
}

// candidates names t's associations of key k, any partition where k has
// none.
func candidates(t *fairshare.Tree, k result.AssocKey) []string {
	var out []string
	for i := range t.Len() {
		if a := t.Association(i); a.Account == k.Account && a.User == k.User && (k.Partition == "" || a.Partition == k.Partition) {
			out = append(out, fmt.Sprintf("%s/%s/%s", a.Account, a.User, a.Partition))
		}
	}
	return out
}

// inOrder: t's associations are the report's rows, key for key in the
// same order, as a tree made from the report itself is (tests stand one in
// for the database): the matcher pairs them by position, with nothing to
// guess. A database's tree, whose associations of one user in one account
// differ by partition, is never so aligned with a listing that drops it.
func inOrder(out *shares.Table, t *fairshare.Tree) bool {
	if t.Len() != len(out.Rows) {
		return false
	}
	for i := range out.Rows {
		r, a := &out.Rows[i], t.Association(i)
		if r.Account != a.Account || r.User != a.User || r.Partition != a.Partition {
			return false
		}
	}
	return true
}
