// Package shares is the table Slurm reports of its associations' shares
// and usage: the rows of `sshare -a -l -P`, `sshare --json` and
// slurmrestd's /shares, as plain data. Reading them is package sshare's
// (which runs commands and speaks HTTP); comparing them is drift's, which
// needs nothing but this table.
package shares

import (
	"fmt"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// UsageResolution is how far a reported RawUsage can be from slurmctld's:
// sshare prints usage_raw truncated to an integer, JSON as an integer.
const UsageResolution = 1

// Column names as sshare prints them in its header.
const (
	Account      = "Account"
	User         = "User"
	Partition    = "Partition"
	Cluster      = "Cluster"
	ID           = "ID"
	RawShares    = "RawShares"
	NormShares   = "NormShares"
	RawUsage     = "RawUsage"
	NormUsage    = "NormUsage"
	EffectvUsage = "EffectvUsage"
	FairShare    = "FairShare"
	LevelFS      = "LevelFS"
	GrpTRESMins  = "GrpTRESMins"
	GrpTRESRaw   = "GrpTRESRaw"
	TRESRunMins  = "TRESRunMins"
)

// Columns is the default column list of `sshare -a [-l] [-m]` for the
// algorithm (process.c): -l adds NormUsage, the TRES columns and, under
// Fair Tree, LevelFS; -m adds Partition after User.
func Columns(fairTree, long, partition bool) []string {
	c := []string{Account, User}
	if partition {
		c = append(c, Partition)
	}
	c = append(c, RawShares, NormShares, RawUsage)
	if long {
		c = append(c, NormUsage)
	}
	c = append(c, EffectvUsage, FairShare)
	if long {
		if fairTree {
			c = append(c, LevelFS)
		}
		c = append(c, GrpTRESMins, TRESRunMins)
	}
	return c
}

// ColumnsForCount picks the default layout with n fields for the algorithm,
// for output without a header (-n).
func ColumnsForCount(n int, fairTree bool) ([]string, error) {
	for _, long := range []bool{false, true} {
		for _, part := range []bool{false, true} {
			if c := Columns(fairTree, long, part); len(c) == n {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("%d fields is not a default sshare -P layout for this algorithm: expected the output of sshare -a -P with or without -l and -m", n)
}

// Row is one line of sshare output. Numbers that sshare left blank, and
// columns the output does not have, are NaN.
type Row struct {
	Line      int // 1-based line number in the input
	Depth     int // indentation level: root 0, a user one deeper than its account
	Account   string
	User      string
	Partition string
	Cluster   string
	// RawShares is fairshare.SharesParent for "parent"; HasShares is false
	// where the cell is blank (root).
	RawShares    uint32
	HasShares    bool
	NormShares   float64
	RawUsage     float64
	NormUsage    float64
	EffectvUsage float64
	FairShare    float64
	LevelFS      float64
	GrpTRESMins  string
	GrpTRESRaw   string
	TRESRunMins  string
}

// Table is a parsed sshare listing.
type Table struct {
	Columns []string
	// Header is true when the input had its header line.
	Header bool
	Rows   []Row
	// Release is Slurm's release from JSON output (meta.slurm.release).
	Release string
	// FactorMissing: classic-mode JSON from 23.11 to 25.05 reports every
	// FairShare as 0, so ParseJSON leaves it NaN for the caller to compute
	// with FillMissingFactor.
	FactorMissing bool
}

// FillMissingFactor computes the FairShare a report leaves out
// (FactorMissing; nothing otherwise) as the classic factor
// 2^(-EffectvUsage/NormShares/dampening) on every row: Slurm's formula
// applied to Slurm's own numbers. dampening is FairShareDampeningFactor.
// serve and check both fill a report with it before comparing.
func (o *Table) FillMissingFactor(dampening float64) {
	if !o.FactorMissing {
		return
	}
	for i := range o.Rows {
		r := &o.Rows[i]
		r.FairShare = fairshare.ClassicFactor(r.EffectvUsage, r.NormShares, dampening)
	}
}

// Algorithm is the algorithm the columns show: only Fair Tree prints
// LevelFS; classic and depth_oblivious print alike, as classic.
func (o *Table) Algorithm() fairshare.Algorithm {
	if o.Has(LevelFS) {
		return fairshare.AlgorithmFairTree
	}
	return fairshare.AlgorithmClassic
}

// Has reports whether the output has the column.
func (o *Table) Has(col string) bool {
	for _, c := range o.Columns {
		if c == col {
			return true
		}
	}
	return false
}

// rootShares stands in for root's blank RawShares: slurmdbd stores 1 (the
// column default) and no value printed by sshare depends on it.
const rootShares = 1

// Tree is the report's associations as a tree (Associations,
// fairshare.NewTree): the replay of the report, and a stand-in for the
// database's tree in tests.
func (o *Table) Tree() (*fairshare.Tree, error) {
	assocs, err := o.Associations()
	if err != nil {
		return nil, err
	}
	return fairshare.NewTree(assocs)
}

// Associations rebuilds the association tree from the rows, in sshare's
// order: an account's parent is the nearest account row one level up, and a
// user row sits one level below its account's row. RawUsage is taken from
// every row, accounts included: an account also holds the usage of removed
// users. parents[i] is the index of row i's direct parent (-1 for root).
func (o *Table) Associations() ([]fairshare.Association, error) {
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
func (o *Table) Unique() error {
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
