package sshare

import (
	"fmt"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// rootShares stands in for root's blank RawShares: slurmdbd stores 1 (the
// column default) and no value printed by sshare depends on it.
const rootShares = 1

// Associations rebuilds the association tree from the rows, in sshare's
// order: an account's parent is the nearest account row one level up, and a
// user row sits one level below its account's row. RawUsage is taken from
// every row, accounts included: an account also holds the usage of removed
// users. parents[i] is the index of row i's direct parent (-1 for root).
func (o *Output) Associations() ([]fairshare.Association, error) {
	if !o.Has(RawShares) || !o.Has(RawUsage) {
		return nil, fmt.Errorf("sshare output has no %s or %s column: both are needed to recompute", RawShares, RawUsage)
	}
	assocs := make([]fairshare.Association, len(o.Rows))
	var stack []int // stack[d] is the latest account row at depth d
	for i := range o.Rows {
		r := &o.Rows[i]
		a := fairshare.Association{Account: r.Account, User: r.User, Partition: r.Partition, Shares: r.RawShares, RawUsage: r.RawUsage, Parent: -1}
		if r.User == "" && r.Partition != "" {
			return nil, fmt.Errorf("sshare line %d: account row with partition %q: expected a partition only on user rows", r.Line, r.Partition)
		}
		switch {
		case i == 0:
			if r.Depth != 0 || r.User != "" {
				return nil, fmt.Errorf("sshare line %d: first row is %q (user %q) at depth %d: expected the root account at depth 0", r.Line, r.Account, r.User, r.Depth)
			}
			if !r.HasShares {
				a.Shares = rootShares
			}
		case r.Depth == 0:
			return nil, fmt.Errorf("sshare line %d: a second row at depth 0: expected one root", r.Line)
		case r.Depth > len(stack):
			return nil, fmt.Errorf("sshare line %d: indented %d spaces, but the account above is at depth %d: expected at most one level deeper", r.Line, r.Depth, len(stack)-1)
		default:
			p := stack[r.Depth-1]
			if r.User != "" && o.Rows[p].Account != r.Account {
				return nil, fmt.Errorf("sshare line %d: user %q of account %q is indented under account %q", r.Line, r.User, r.Account, o.Rows[p].Account)
			}
			if !r.HasShares {
				return nil, fmt.Errorf("sshare line %d: RawShares is blank: expected a number or \"parent\" on every row but root", r.Line)
			}
			a.Parent = p
		}
		if r.User == "" {
			stack = append(stack[:r.Depth], i)
		}
		if math.IsNaN(r.RawUsage) {
			return nil, fmt.Errorf("sshare line %d: RawUsage is blank: expected an integer", r.Line)
		}
		assocs[i] = a
	}
	return assocs, nil
}

// Unique returns an error naming the first association listed twice. An
// account is listed once; so is a user's association in an account and a
// partition, but without a Partition column (sshare without -m) the rows of
// one user's associations in several partitions look alike, and only
// account rows are checked.
func (o *Output) Unique() error {
	type key struct{ cluster, account, user, partition string }
	seen := make(map[key]int)
	partitions := o.Has(Partition)
	for _, r := range o.Rows {
		if r.User != "" && !partitions {
			continue
		}
		k := key{r.Cluster, r.Account, r.User, r.Partition}
		if first, ok := seen[k]; ok {
			return fmt.Errorf("sshare line %d: account %q, user %q, partition %q again (first on line %d): expected each association once", r.Line, r.Account, r.User, r.Partition, first)
		}
		seen[k] = r.Line
	}
	return nil
}
