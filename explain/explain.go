// Package explain answers "why is my priority low?": the path from root
// with shares, usage, level_fs and rank, the factor under each algorithm
// and what holds it down; a pending job's priority factor by factor; a
// recovery forecast and what-if shares. It computes from build.Inputs
// and result.Cluster and writes tables and JSON; it reads nothing itself.
package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// AssocName names an association in explain's JSON.
type AssocName struct {
	Account   string `json:"account"`
	User      string `json:"user,omitempty"`
	Partition string `json:"partition,omitempty"`
}

// ClusterAt heads explain's answers: which cluster, as of when, under
// which algorithm.
type ClusterAt struct {
	Cluster   string    `json:"cluster"`
	At        time.Time `json:"at"`
	Algorithm string    `json:"algorithm"`
}

// Level is one association on the path from root to the user.
type Level struct {
	AssocName
	// Shares is assoc_table.shares; FairShare=parent stores
	// fairshare.SharesParent there, which FairShareParent says, and the
	// table prints as "parent" rather than a share count.
	Shares          uint32  `json:"shares"`
	FairShareParent bool    `json:"fairshare_parent"`
	RawUsage        float64 `json:"raw_usage"`
	// Per algorithm, as slurmctld computes them.
	NormShares     map[string]drift.Num `json:"norm_shares"`
	NormUsage      drift.Num            `json:"norm_usage"`
	EffectiveUsage map[string]drift.Num `json:"effective_usage"`
	LevelFS        drift.Num            `json:"level_fs"`
	Rank           int32                `json:"rank,omitempty"`
}

// Explanation answers "why is my priority low?" for one association.
type Explanation struct {
	ClusterAt
	Path     []Level              `json:"path"`
	Factors  map[string]drift.Num `json:"factors"`
	Reported *drift.Num           `json:"reported_factor,omitempty"`
	// FactorRanges are classic's and Fair Tree's factors over every
	// moment slurmctld's last decay pass may have fallen at (Phase):
	// what Slurm reports lies inside.
	FactorRanges map[string][2]drift.Num `json:"factor_ranges,omitempty"`
	Phase        result.Phase            `json:"phase"`
	Users        int                     `json:"user_associations"`
	Reason       string                  `json:"reason"`
	// Forecast is the recovery forecast (--forecast).
	Forecast *ForecastExplanation `json:"forecast,omitempty"`
	// UsageBound is how far the association's RawUsage may be from
	// slurmctld's without a fault, and what makes it so (UsageBounds).
	UsageBound *result.UsageBound `json:"usage_bound,omitempty"`
}

// UsageBounds sets each explanation's UsageBound from in, whose tree the
// explanations' paths end in: what the moment of slurmctld's passes,
// running jobs, unrecorded job ends and finished jobs' tails leave
// unknown of its RawUsage (drift.PassError.Parts), and sshare's integer
// RawUsage, as check judges it.
func UsageBounds(exps []Explanation, in *build.Inputs) {
	parts := in.PassError(nil).Parts(in.Tree)
	for k := range exps {
		if i := TreeIndex(in.Tree, exps[k].Path[len(exps[k].Path)-1]); i >= 0 {
			b := parts[i]
			b.Truncation = shares.UsageResolution
			exps[k].UsageBound = &b
		}
	}
}

// TreeIndex is the tree association a path's last level is.
func TreeIndex(t *fairshare.Tree, l Level) int {
	for i := range t.Len() {
		if a := t.Association(i); a.Account == l.Account && a.User == l.User && a.Partition == l.Partition {
			return i
		}
	}
	return -1
}

// Write prints v, an answer of this package ([]Explanation,
// []JobExplanation, *WhatIf), as a table or, for format "json", as JSON.
func Write(w io.Writer, format string, v any) error {
	if format == "json" {
		return WriteJSON(w, v)
	}
	switch x := v.(type) {
	case []Explanation:
		for _, e := range x {
			e.WriteTable(w)
		}
	case []JobExplanation:
		for _, e := range x {
			e.WriteTable(w)
		}
	case *WhatIf:
		x.WriteTable(w)
	default:
		return fmt.Errorf("explain: no table for %T", v)
	}
	return nil
}

// WriteJSON writes v as explain --output json prints it: indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// User explains user's associations (only that under account, if not
// empty): their paths from root, factors and what holds them down.
func User(cl result.Cluster, at time.Time, user, account string, phase result.Phase) ([]Explanation, error) {
	accounts := map[string]*result.Association{}
	users := 0
	for i := range cl.Assocs {
		a := &cl.Assocs[i]
		if a.User == "" {
			accounts[a.Account] = a
		} else {
			users++
		}
	}
	var out []Explanation
	for i := range cl.Assocs {
		a := &cl.Assocs[i]
		if a.User != user || (account != "" && a.Account != account) {
			continue
		}
		path := []*result.Association{a}
		for p := accounts[a.Account]; p != nil; p = accounts[p.Parent] {
			path = append([]*result.Association{p}, path...)
			if p.Parent == "" || len(path) > 64 {
				break
			}
		}
		x := Explanation{ClusterAt: ClusterAt{cl.Name, at, string(cl.Algorithm)}, Users: users, Factors: map[string]drift.Num{
			"classic": drift.Num(a.Classic.FairShare), "fair_tree": drift.Num(a.FairTree.FairShare),
			"ticket_based": drift.Num(a.TicketBased), "maui": drift.Num(a.Maui),
		}}
		x.Phase = phase
		if !math.IsNaN(a.ReportedFactor) {
			r := drift.Num(a.ReportedFactor)
			x.Reported = &r
		}
		if r := a.Range; r != nil {
			x.FactorRanges = map[string][2]drift.Num{
				"classic":   {drift.Num(r.Classic[0]), drift.Num(r.Classic[1])},
				"fair_tree": {drift.Num(r.FairTree[0]), drift.Num(r.FairTree[1])},
			}
		}
		for _, p := range path {
			x.Path = append(x.Path, Level{AssocName: AssocName{p.Account, p.User, p.Partition}, Shares: p.Shares, FairShareParent: p.Shares == fairshare.SharesParent,
				RawUsage:       p.RawUsage,
				NormShares:     map[string]drift.Num{"classic": drift.Num(p.Classic.NormShares), "fair_tree": drift.Num(p.FairTree.NormShares)},
				NormUsage:      drift.Num(p.Classic.NormUsage),
				EffectiveUsage: map[string]drift.Num{"classic": drift.Num(p.Classic.EffectiveUsage), "fair_tree": drift.Num(p.FairTree.EffectiveUsage)},
				LevelFS:        drift.Num(p.FairTree.LevelFS), Rank: p.FairTree.Rank})
		}
		x.Reason = reason(cl, path)
		out = append(out, x)
	}
	if len(out) == 0 {
		what := fmt.Sprintf("user %q", user)
		if account != "" {
			what += fmt.Sprintf(" under account %q", account)
		}
		return nil, fmt.Errorf("%s: no association in cluster %s", what, cl.Name)
	}
	return out, nil
}

// reason names the level on the path that used most over its share: the
// one that holds the factor down. Under Fair Tree that is the lowest
// LevelFS (usage over shares among siblings); classic compares effective
// usage with normalized shares of the whole cluster.
func reason(cl result.Cluster, path []*result.Association) string {
	worst, ratio := -1, 0.0
	for i, p := range path[1:] {
		var r float64
		if cl.Algorithm == fairshare.AlgorithmFairTree {
			r = 1 / p.FairTree.LevelFS
		} else if p.Classic.NormShares > 0 {
			r = p.Classic.EffectiveUsage / p.Classic.NormShares
		}
		if !math.IsNaN(r) && !math.IsInf(r, 0) && r > ratio {
			worst, ratio = i+1, r
		}
	}
	hl := cl.Config.HalfLife
	window := fmt.Sprintf("over the decayed history (half-life %s)", humanDuration(hl))
	if hl == 0 {
		window = "since the last usage reset"
	}
	if worst < 0 || ratio <= 1 {
		return "No level on the path has used more than its share " + window + "; the factor is set by siblings and other users, not by this user's usage."
	}
	p := path[worst]
	who := "account " + p.Account
	if p.User != "" {
		who = "user " + p.User + " (account " + p.Account + ")"
	}
	among := "of its share among its siblings"
	if cl.Algorithm != fairshare.AlgorithmFairTree {
		among = "of its share of the cluster"
	}
	return fmt.Sprintf("%s has used %.1f× %s %s.", who, ratio, among, window)
}

func humanDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.String()
}

// term makes a name from the database or Slurm safe to print on a
// terminal: control characters (escape sequences, CR, tabs and newlines,
// which would also break the table) and bytes that are not UTF-8 are
// written as Go escapes. JSON output escapes them itself.
func term(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			q := strconv.QuoteToGraphic(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// WriteTable prints the explanation as explain's table.
func (x Explanation) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cluster %s at %s, %s (slurm.conf)\n\n", term(x.Cluster), x.At.Format(time.RFC3339), x.Algorithm)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "association\tshares\tnorm shares (classic)\tnorm shares (fair tree)\traw usage\tnorm usage\teff usage (classic)\teff usage (fair tree)\tlevel_fs\trank\t")
	for i, l := range x.Path {
		name := strings.Repeat(" ", i) + term(l.Account)
		if l.User != "" {
			name = strings.Repeat(" ", i) + term(l.User)
			if l.Partition != "" {
				name += " (" + term(l.Partition) + ")"
			}
		}
		rank := ""
		if l.Rank > 0 {
			rank = fmt.Sprintf("%d/%d", l.Rank, x.Users)
		}
		shares := strconv.FormatUint(uint64(l.Shares), 10)
		if l.FairShareParent {
			shares = "parent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", name, shares, num(l.NormShares["classic"]), num(l.NormShares["fair_tree"]),
			l.RawUsage, num(l.NormUsage), num(l.EffectiveUsage["classic"]), num(l.EffectiveUsage["fair_tree"]), num(l.LevelFS), rank)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nfactor: classic %s, fair_tree %s, ticket_based %s (what-if), maui %s (what-if)", num(x.Factors["classic"]), num(x.Factors["fair_tree"]), num(x.Factors["ticket_based"]), num(x.Factors["maui"]))
	if x.Reported != nil {
		fmt.Fprintf(w, "; Slurm reports %s", num(*x.Reported))
	}
	if c, f := x.FactorRanges["classic"], x.FactorRanges["fair_tree"]; wide(c) || wide(f) {
		fmt.Fprintf(w, "\n%s: classic %s, fair_tree %s", x.Phase.Describe(), numRange(c), numRange(f))
	}
	if b := x.UsageBound; b != nil {
		fmt.Fprintf(w, "\nraw usage may be %.0f from slurmctld's without a fault: decay %.0f, running jobs %.0f, unrecorded job ends %.0f, finished jobs' tails %.0f, passes of earlier boots %.0f, jobs billed by other weights %.0f, sshare's truncation %.0f",
			b.Total(), b.Decay, b.Running, b.Unrecorded, b.Tails, b.EarlierBoots, b.Unpriced, b.Truncation)
	}
	fmt.Fprintf(w, "\n%s\n\n", term(x.Reason))
	if x.Forecast != nil {
		x.Forecast.WriteTable(w)
	}
}

// num prints a value as the table shows it: - for blank, inf, %.6f.
func num(n drift.Num) string {
	switch f := float64(n); {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 1):
		return "inf"
	}
	return fmt.Sprintf("%.6f", float64(n))
}

// wide: r spans more than the six decimals the table prints.
func wide(r [2]drift.Num) bool { return float64(r[1]-r[0]) >= 1e-6 }

func numRange(r [2]drift.Num) string {
	if !wide(r) {
		return num(r[0])
	}
	return num(r[0]) + "–" + num(r[1])
}
