// Package refresh computes what the exporter publishes: the fairshare
// values of each cluster from the database, what Slurm reports, and the
// drift between the two. Build is the pure part; Exporter runs the loops
// that read the sources and publish.
package refresh

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// Tolerance is how much drift is allowed before an association counts as
// beyond tolerance. The defaults are justified in docs/usage.md by
// measurement against real Slurm.
type Tolerance struct {
	// Formula is absolute, on top of what the report's print precision
	// explains: Slurm's values against the algorithm replayed on Slurm's
	// own usage.
	Formula float64
	// Usage is relative: the database's RawUsage against Slurm's.
	Usage float64
	// Factor is absolute: the factor computed from the database's usage
	// against the one computed from Slurm's.
	Factor float64
}

// DefaultTolerance: measured formula drift is below 1e-6 beyond print
// precision, usage drift below 0.01%, on real Slurm 22.05.
var DefaultTolerance = Tolerance{Formula: 1e-4, Usage: 0.005, Factor: 0.01}

// Settings are a cluster's priority settings.
type Settings struct {
	Algorithm fairshare.Algorithm
	Dampening float64
	Config    result.Config
}

// Report is what Slurm reported, and when.
type Report struct {
	Out *sshare.Output
	At  time.Time
	// PrevRaw is RawUsage per association from the report taken before
	// slurmctld's last decay pass (nil: none): classic values lag by one
	// pass (fairshare.ClassicLagged).
	PrevRaw map[drift.Key]float64
	// DB is the database's tree rebuilt at At (nil: Inputs.Tree is).
	DB *fairshare.Tree
	// Memo, shared by every Report made of one reading (nil: none), keeps
	// Build's comparison with it: the report and the database's tree at
	// its moment change only with the next reading, while Build runs after
	// every refresh. At 11k associations the comparison was 25 of Build's
	// 30 ms.
	Memo *ReportMemo
}

// ReportMemo holds the comparison of one report with what it was made for.
type ReportMemo struct {
	key memoKey
	rc  *reportComparison
}

type memoKey struct {
	algorithm fairshare.Algorithm
	dampening float64
	tolerance Tolerance
	tieOrder  bool
	db        *fairshare.Tree
	lagged    bool
}

// Inputs are everything Build needs for one cluster; slices are indexed
// like Tree.
type Inputs struct {
	Name     string
	Settings Settings
	// Tree holds the database's associations with their rebuilt RawUsage,
	// in slurmctld's order when TieOrderKnown.
	Tree          *fairshare.Tree
	TieOrderKnown bool
	// PhaseKnown: the moment of slurmctld's decay passes was read from
	// its state (priority_last_decay_ran); otherwise usage may be off by
	// up to one PriorityCalcPeriod of charge.
	PhaseKnown bool
	// TRES is decayed usage per TRES name; Uncharged, Pending (has pending
	// jobs) and MauiUsage (windowed usage fraction) may be nil.
	TRES      map[string][]float64
	Uncharged []float64
	Pending   []bool
	MauiUsage []float64
	Maui      fairshare.MauiConfig
	// LastRollup is zero before the first hourly rollup.
	LastRollup, Computed time.Time
	// Report is nil when no report is fresh.
	Report    *Report
	Tolerance Tolerance

	// Priorities are the pending jobs (nil: not computed).
	Priorities *Priorities
	// Memo, kept per cluster across refreshes (nil: none), saves
	// computing the same associations again.
	Memo *BuildMemo

	assocIDs      []uint32 // id_assoc of each tree association
	tresNames     map[uint32]string
	qos           map[uint32]slurmdbd.QOS
	assocPriority []uint32 // inherited priority of each (nil: weight 0)
}

// Build computes a cluster's published values.
func Build(in *Inputs) (result.Cluster, error) {
	cl := result.Cluster{Name: in.Name, Algorithm: in.Settings.Algorithm, Config: in.Settings.Config, LastRollup: in.LastRollup, Computed: in.Computed}
	var rc *reportComparison
	if in.Report != nil {
		var err error
		if rc, err = memoCompare(in); err != nil {
			return cl, fmt.Errorf("cluster %s: report of %s: %w", in.Name, in.Report.At.Format(time.RFC3339), err)
		}
		cl.Drift, cl.Applied = rc.drift, rc.applied
	}
	m := in.Memo
	if m == nil {
		m = &BuildMemo{}
	}
	if !m.holds(in, rc) {
		m.assocs, m.tresNames = buildAssocs(in, rc)
	}
	m.keep(in, rc)
	cl.Assocs, cl.TRESNames = m.assocs, m.tresNames
	cl.Jobs, cl.Pending = jobPriorities(in, m.assocs)
	if in.Priorities != nil {
		cl.Weights = in.Priorities.Config.Weights
	}
	return cl, nil
}

// BuildMemo keeps Build's per-association values for the next Build of the
// same cluster. Between slurmctld's decay passes a refresh finds the same
// tree, usage and report, and computing them again was 4.5 of the build
// stage's 5 ms at 11k associations (BenchmarkBuild). Published snapshots
// share the kept associations, which nothing changes.
type BuildMemo struct {
	// what they were computed from
	tree      *fairshare.Tree
	settings  Settings
	tres      map[string][]float64
	uncharged []float64
	pending   []bool
	mauiUsage []float64
	maui      fairshare.MauiConfig
	rc        *reportComparison

	assocs    []result.Association
	tresNames []string
}

// holds reports whether m's values are those of in and rc.
func (m *BuildMemo) holds(in *Inputs, rc *reportComparison) bool {
	return m.assocs != nil && m.rc == rc && m.settings == in.Settings && m.maui == in.Maui && m.tree.Same(in.Tree) &&
		maps.EqualFunc(m.tres, in.TRES, slices.Equal) && slices.Equal(m.uncharged, in.Uncharged) &&
		slices.Equal(m.pending, in.Pending) && slices.Equal(m.mauiUsage, in.MauiUsage)
}

// keep records in and rc as what m's values are of: the newest equal
// inputs, so that the memo holds no older generation alive.
func (m *BuildMemo) keep(in *Inputs, rc *reportComparison) {
	m.tree, m.settings, m.tres, m.uncharged, m.pending, m.mauiUsage, m.maui, m.rc =
		in.Tree, in.Settings, in.TRES, in.Uncharged, in.Pending, in.MauiUsage, in.Maui, rc
}

// buildAssocs computes every association's published values.
func buildAssocs(in *Inputs, rc *reportComparison) (assocs []result.Association, tresNames []string) {
	s := in.Settings
	t := in.Tree
	classic := t.Classic(fairshare.ClassicOptions{Dampening: s.Dampening})
	ft := t.FairTree()
	n := t.Len()
	assocs = make([]result.Association, n)
	// one backing array for every association's TRES: a map each was 40%
	// of Build at 11k associations
	tresNames = slices.Sorted(maps.Keys(in.TRES))
	tres := make([]float64, n*len(tresNames))
	var ticket []fairshare.Values
	if in.Pending != nil {
		ticket, _ = t.TicketBased(in.Pending, s.Dampening)
	}
	for i := range n {
		a := t.Association(i)
		o := &assocs[i]
		o.Account, o.User, o.Partition, o.Shares, o.RawUsage = a.Account, a.User, a.Partition, a.Shares, a.RawUsage
		if in.assocIDs != nil {
			o.ID = in.assocIDs[i]
		}
		if a.Parent >= 0 {
			o.Parent = t.Association(a.Parent).Account
		}
		o.Classic, o.FairTree = classic[i], ft[i]
		o.TicketBased, o.Maui, o.Uncharged = math.NaN(), math.NaN(), math.NaN()
		o.ReportedFactor, o.ReportedUsage = math.NaN(), math.NaN()
		if ticket != nil {
			o.TicketBased = ticket[i].FairShare
		}
		if in.MauiUsage != nil {
			o.Maui = fairshare.MauiComponent(in.MauiUsage[i], classic[i].NormShares, fairshare.Target, in.Maui)
		}
		if in.Uncharged != nil {
			o.Uncharged = in.Uncharged[i]
		}
		if k := len(tresNames); k > 0 {
			o.TRES = tres[i*k : (i+1)*k : (i+1)*k]
			for j, name := range tresNames {
				o.TRES[j] = in.TRES[name][i]
			}
		}
		if rc == nil {
			continue
		}
		if r, ok := rc.byKey[drift.Key{Account: o.Account, User: o.User, Partition: o.Partition}]; ok {
			o.ReportedFactor, o.ReportedUsage = r.FairShare, r.RawUsage
		}
	}
	return assocs, tresNames
}

// reportComparison is what a report adds to a cluster.
type reportComparison struct {
	drift   []result.Drift
	applied fairshare.Algorithm
	byKey   map[drift.Key]*sshare.Row
}

// memoCompare is compareReport, computed once per report and inputs.
func memoCompare(in *Inputs) (*reportComparison, error) {
	db := in.Report.DB
	if db == nil {
		db = in.Tree
	}
	key := memoKey{in.Settings.Algorithm, in.Settings.Dampening, in.Tolerance, in.TieOrderKnown, db, in.Report.PrevRaw != nil}
	m := in.Report.Memo
	if m != nil && m.rc != nil && m.key == key {
		return m.rc, nil
	}
	rc, err := compareReport(in)
	if err == nil && m != nil {
		m.key, m.rc = key, rc
	}
	return rc, err
}

func compareReport(in *Inputs) (*reportComparison, error) {
	s, tol, out := in.Settings, in.Tolerance, in.Report.Out
	db := in.Report.DB
	if db == nil {
		db = in.Tree
	}
	own, err := db.Compute(s.Algorithm, s.Dampening)
	if err != nil {
		return nil, err
	}
	assocs, err := out.Associations()
	if err != nil {
		return nil, err
	}
	rt, err := fairshare.NewTree(assocs)
	if err != nil {
		return nil, err
	}
	replay, err := rt.Compute(s.Algorithm, s.Dampening)
	if err != nil {
		return nil, err
	}
	bounds := rt.UsageBounds(s.Algorithm, replay, sshare.UsageResolution, s.Dampening)
	if s.Algorithm == fairshare.AlgorithmClassic && in.Report.PrevRaw != nil {
		widenForLag(rt, replay, bounds, in.Report.PrevRaw, s.Dampening)
	}
	rc := &reportComparison{byKey: make(map[drift.Key]*sshare.Row, len(out.Rows)), applied: applied(out, rt, s.Algorithm)}
	for i := range out.Rows {
		r := &out.Rows[i]
		rc.byKey[drift.Key{Account: r.Account, User: r.User, Partition: r.Partition}] = r
	}
	reported := drift.FromSshare(out)
	for i := range reported {
		if notYetComputed(out, &out.Rows[i]) {
			v := &reported[i].Values
			v.EffectiveUsage, v.FairShare, v.LevelFS = drift.Num(math.NaN()), drift.Num(math.NaN()), drift.Num(math.NaN())
		}
	}
	formula := drift.Summarize(tol.Formula, reported, drift.FromTree(rt, replay, bounds))
	m := formula.MaxDrift
	for k, v := range []drift.Num{m.NormShares, m.NormUsage, m.EffectiveUsage, m.FairShare, m.LevelFS} {
		name := []string{"norm_shares", "norm_usage", "effective_usage", "fairshare", "level_fs"}[k]
		rc.drift = append(rc.drift, result.Drift{Kind: result.DriftFormula, Value: name, Max: math.Abs(float64(v)), Beyond: formula.Beyond[name]})
	}
	if s.Algorithm == fairshare.AlgorithmFairTree {
		rc.drift = append(rc.drift, formulaRanks(out, rt, replay, rc.byKey))
	}
	rc.drift = append(rc.drift, usageDrift(db, own, rt, replay, s.Algorithm, in.TieOrderKnown, tol)...)
	return rc, nil
}

// notYetComputed: slurmctld leaves NormUsage unset (blank) on
// associations added since its last decay pass, and their factor at 0 and
// LevelFS at 0 until the pass; that is not drift.
func notYetComputed(out *sshare.Output, r *sshare.Row) bool {
	return r.Depth > 0 && math.IsNaN(r.NormUsage) && out.Has(sshare.NormUsage)
}

// widenForLag allows each value to be anywhere between the replay and the
// replay lagged by one decay pass: slurmctld computes classic effective
// usage at the start of each pass.
func widenForLag(rt *fairshare.Tree, replay, bounds []fairshare.Values, prevRaw map[drift.Key]float64, damp float64) {
	prev := make([]float64, rt.Len())
	for i := range prev {
		a := rt.Association(i)
		v, ok := prevRaw[drift.Key{Account: a.Account, User: a.User, Partition: a.Partition}]
		if !ok {
			v = a.RawUsage
		}
		prev[i] = v
	}
	lagged := rt.ClassicLagged(prev, damp)
	for i := range bounds {
		b, r, l := &bounds[i], &replay[i], &lagged[i]
		b.NormUsage += absDiff(r.NormUsage, l.NormUsage)
		b.EffectiveUsage += absDiff(r.EffectiveUsage, l.EffectiveUsage)
		b.FairShare += absDiff(r.FairShare, l.FairShare)
	}
}

func absDiff(a, b float64) float64 {
	d := math.Abs(a - b)
	if math.IsNaN(d) {
		return 0
	}
	return d
}

// formulaRanks compares Fair Tree ranks (FairShare × user associations:
// one swap moves FairShare by only 1/N) with the replay's rank range.
func formulaRanks(out *sshare.Output, rt *fairshare.Tree, replay []fairshare.Values, reported map[drift.Key]*sshare.Row) result.Drift {
	d := result.Drift{Kind: result.DriftFormula, Value: "rank"}
	users := float64(rt.Users())
	for i := range replay {
		a := rt.Association(i)
		r, ok := reported[drift.Key{Account: a.Account, User: a.User, Partition: a.Partition}]
		if !ok || !a.IsUser() || math.IsNaN(r.FairShare) || notYetComputed(out, r) {
			continue
		}
		off := rankOutside(math.Round(r.FairShare*users), replay[i])
		d.Max = math.Max(d.Max, off)
		if off > 0 {
			d.Beyond++
		}
	}
	return d
}

// rankOutside is how far rank lies outside v's rank range.
func rankOutside(rank float64, v fairshare.Values) float64 {
	lo, hi := float64(min(v.RankMin, v.RankMax)), float64(max(v.RankMin, v.RankMax))
	return math.Max(0, math.Max(lo-rank, rank-hi))
}

// usageDrift compares the database's tree with the one Slurm reported:
// usage (relative), shares, which associations exist, and what the usage
// difference does to the factor and, under Fair Tree, the rank.
func usageDrift(t *fairshare.Tree, own []fairshare.Values, rt *fairshare.Tree, replay []fairshare.Values, alg fairshare.Algorithm, tieOrderKnown bool, tol Tolerance) []result.Drift {
	usage := result.Drift{Kind: result.DriftUsage, Value: "raw_usage"}
	shares := result.Drift{Kind: result.DriftUsage, Value: "shares"}
	factor := result.Drift{Kind: result.DriftUsage, Value: "fairshare"}
	rank := result.Drift{Kind: result.DriftUsage, Value: "rank"}
	present := result.Drift{Kind: result.DriftUsage, Value: "associations"}
	fairTree := alg == fairshare.AlgorithmFairTree
	users := t.Users()
	idx := make(map[drift.Key]int, rt.Len())
	for i := range rt.Len() {
		a := rt.Association(i)
		idx[drift.Key{Account: a.Account, User: a.User, Partition: a.Partition}] = i
	}
	for i := range t.Len() {
		a := t.Association(i)
		k := drift.Key{Account: a.Account, User: a.User, Partition: a.Partition}
		j, ok := idx[k]
		if !ok {
			present.Beyond++
			continue
		}
		delete(idx, k)
		r := rt.Association(j)
		if d := math.Abs(a.RawUsage - r.RawUsage); d > 0 {
			scale := math.Max(a.RawUsage, r.RawUsage)
			usage.Max = math.Max(usage.Max, d/math.Max(scale, 1))
			if d > tol.Usage*scale+sshare.UsageResolution {
				usage.Beyond++
			}
		}
		if a.Shares != r.Shares && a.Parent >= 0 {
			shares.Beyond++
			shares.Max = math.Max(shares.Max, math.Abs(float64(a.Shares)-float64(r.Shares)))
		}
		d := absDiff(own[i].FairShare, replay[j].FairShare)
		factor.Max = math.Max(factor.Max, d)
		allowed := tol.Factor
		if fairTree && !tieOrderKnown {
			allowed += own[i].RankSpread(users) + replay[j].RankSpread(rt.Users())
		}
		if d > allowed {
			factor.Beyond++
		}
		if fairTree && a.IsUser() {
			off := rankOutside(float64(replay[j].Rank), own[i])
			if tieOrderKnown {
				off = math.Abs(float64(replay[j].Rank - own[i].Rank))
			}
			// the replay's own tie order is unknown too
			off = math.Max(0, off-float64(replay[j].RankMax-replay[j].RankMin))
			rank.Max = math.Max(rank.Max, off)
			if off > 0 {
				rank.Beyond++
			}
		}
	}
	present.Beyond += len(idx)
	present.Max = float64(present.Beyond)
	out := []result.Drift{usage, shares, factor, present}
	if fairTree {
		out = append(out, rank)
	}
	return out
}

// applied infers the algorithm slurmctld applies from its report: a
// LevelFS column is Fair Tree; otherwise classic normalizes shares over
// the whole cluster and Fair Tree among siblings (what slurmctld keeps
// computing from when PriorityFlags change without a restart).
func applied(out *sshare.Output, rt *fairshare.Tree, configured fairshare.Algorithm) fairshare.Algorithm {
	if out.Has(sshare.LevelFS) {
		return fairshare.AlgorithmFairTree
	}
	global := rt.Classic(fairshare.ClassicOptions{Dampening: 1})
	sibling := rt.FairTree()
	const eps = 2e-6 // sshare's six decimals
	offGlobal, offSibling := 0, 0
	for i := range out.Rows {
		v := out.Rows[i].NormShares
		if math.IsNaN(v) || i >= rt.Len() {
			continue
		}
		if math.Abs(v-global[i].NormShares) > eps {
			offGlobal++
		}
		if math.Abs(v-sibling[i].NormShares) > eps {
			offSibling++
		}
	}
	switch {
	case offGlobal == 0 && configured != fairshare.AlgorithmFairTree:
		return configured // classic and depth_oblivious normalize alike
	case offGlobal == 0:
		return fairshare.AlgorithmClassic
	case offSibling == 0:
		return fairshare.AlgorithmFairTree
	}
	return "unknown"
}
