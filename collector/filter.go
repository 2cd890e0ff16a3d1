package collector

import (
	"fmt"
	"regexp"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// Filter holds the cardinality controls: every association is at least a
// dozen series, and a large site has tens of thousands.
type Filter struct {
	// NoUsers leaves out user associations (accounts only).
	NoUsers bool
	// Include and Exclude match whole account names; nil matches all and
	// none. Root is always kept.
	Include, Exclude *regexp.Regexp
	// MaxAssociations per cluster (0: no limit): beyond it user rows are
	// dropped, then accounts, deepest last in the tree's order.
	MaxAssociations int
}

// CompileAnchored compiles an account pattern matched against the whole
// name, as Prometheus anchors its regular expressions; "" gives nil.
func CompileAnchored(flag, expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("%s %q: expected a regular expression (RE2): %v", flag, expr, err)
	}
	return re, nil
}

// Apply returns the associations to export, in their order, and how many
// were dropped by MaxAssociations (not counting what the other controls
// leave out on purpose).
func (f Filter) Apply(as []result.Association) (kept []result.Association, dropped int) {
	if !f.NoUsers && f.Include == nil && f.Exclude == nil && (f.MaxAssociations <= 0 || len(as) <= f.MaxAssociations) {
		return as, 0 // the usual case, not copied: a copy of every association would be a large part of a steady refresh's CPU
	}
	kept = make([]result.Association, 0, len(as))
	users := 0
	for _, a := range as {
		isRoot := a.Parent == "" && a.User == ""
		if !isRoot {
			if (f.NoUsers && a.User != "") ||
				(f.Include != nil && !f.Include.MatchString(a.Account)) ||
				(f.Exclude != nil && f.Exclude.MatchString(a.Account)) {
				continue
			}
		}
		if a.User != "" {
			users++
		}
		kept = append(kept, a)
	}
	if f.MaxAssociations <= 0 || len(kept) <= f.MaxAssociations {
		return kept, 0
	}
	n := len(kept)
	if n-users <= f.MaxAssociations {
		out := kept[:0]
		room := f.MaxAssociations - (n - users)
		for _, a := range kept {
			if a.User == "" || room > 0 {
				if a.User != "" {
					room--
				}
				out = append(out, a)
			}
		}
		return out, n - len(out)
	}
	accounts := kept[:0]
	for _, a := range kept {
		if a.User == "" && len(accounts) < f.MaxAssociations {
			accounts = append(accounts, a)
		}
	}
	return accounts, n - len(accounts)
}
