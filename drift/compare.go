package drift

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Tolerance is how much drift is allowed, on top of what the inputs'
// precision explains, before an association counts as drifting. The
// defaults are justified in docs/serve.md by measurement against real
// Slurm.
type Tolerance struct {
	// Formula is absolute: Slurm's values against the algorithm replayed
	// on Slurm's own usage.
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

// Input is a report and what it is compared with.
type Input struct {
	Algorithm fairshare.Algorithm
	Dampening float64
	Tolerance Tolerance
	Report    *shares.Table
	// PrevRaw is RawUsage per association from the report taken before
	// slurmctld's last decay pass (nil: none): classic values lag by one
	// pass (fairshare.ClassicLagged).
	PrevRaw map[Key]float64
	// PassRaw is RawUsage per association from the first report after
	// slurmctld's last decay pass (nil: none, or this report): with
	// AccountingStorageEnforce=limits a job's end charges its last
	// partial interval at once, while the values computed at the pass
	// (NormUsage, EffectvUsage, LevelFS, FairShare, the rank) stay until
	// the next one. Each may then lie between the replay on the report's
	// usage and the replay on PassRaw.
	PassRaw map[Key]float64
	// PassGap is how long, in seconds, after slurmctld's pass the report
	// PassRaw comes from may have been read (the bracket it closed): jobs
	// ending in between were charged into it already, at most the
	// running jobs' rate (Pass.Running) times the gap.
	PassGap float64
	// InferLag, with no PrevRaw and the classic algorithm, tells drift that
	// slurmctld's one-pass lag explains from drift it does not: slurmctld
	// computes the accounts' NormUsage at the start of each pass, so the
	// report's own accounts' NormUsage stands for the usage then, and an
	// entry whose values match fairshare.ClassicLagged on that usage
	// within the inputs' precision is StatusLagNotExcluded, not drift.
	// Only when the report shows usage charged during the last pass (an
	// account's NormUsage off its RawUsage share, or TRESRunMins not 0),
	// and only with entries (check, on a report with no earlier one).
	InferLag bool
	// DB is the database's tree rebuilt at the report's moment (nil: the
	// report is only replayed, as check does without a database).
	DB *fairshare.Tree
	// TieOrderKnown: DB is in slurmctld's order (its boot time is
	// known), so tied Fair Tree siblings rank as slurmctld ranks them.
	TieOrderKnown bool
	// Pass is what DB's usage may miss of slurmctld's: the decay pass DB
	// was rebuilt for and slurmctld's last one may be Pass.Window apart
	// (zero: none).
	Pass PassError
	// Settling: slurmctld has started since the last decay pass seen
	// between two reads of it. Until one is, the values it computes at a
	// pass (NormUsage, EffectvUsage, LevelFS, FairShare, the rank) are
	// not yet computed from what it reports beside them (a soak's only
	// false alarm came 45 s after a restart): formula drift is measured
	// but not judged, its bound infinite.
	Settling bool
	// Losses are the usage losses seen between reads of slurmctld
	// (nil: none were compared, as in check): the evidence that tells a
	// reset or a restart from other causes of usage drift (diagnose).
	Losses []result.UsageLoss
	// Named is how many of the associations drifting the most on usage
	// Comparison.Named names (0: none).
	Named int
}

// PassError describes how far apart the decay pass a database rebuild
// stands at and slurmctld's last pass may be, and what moves usage in
// between: decay of all of it, and the charge of the jobs then running.
type PassError struct {
	// Window is the largest distance between the two passes, in seconds:
	// the whole PriorityCalcPeriod when the phase of slurmctld's passes
	// is unknown, the uncertainty of the phase when it is known.
	Window float64
	// Decay is slurmctld's per-second decay factor (fairshare.Passes.D).
	Decay float64
	// Running is the billing rate of the jobs that ran in the last
	// PriorityCalcPeriod, per association of DB (subtree sums).
	Running []float64
	// Tails bound finished jobs' uncharged tails, which the passes'
	// moment decides without AccountingStorageEnforce=limits (nil:
	// none).
	Tails []Tails
	// TailLost is what slurmctld may not have charged of jobs that ended
	// just after a pass, before the pass reached them
	// (fairshare.Passes.LockWait), per association (nil: none).
	TailLost []float64
	// SincePass is how long, in seconds, before the report slurmctld's
	// last pass may have been under AccountingStorageEnforce=limits (0:
	// not), the time job ends may have raised RawUsage in since the
	// values computed at the pass.
	SincePass float64
	// Unrecorded is how long, in seconds, before the report slurmctld
	// may have charged a job's end that the database does not hold yet:
	// under AccountingStorageEnforce=limits it charges a job's last
	// partial interval when the job ends, and slurmdbd records the end a
	// moment later, so the rebuild still counts the job as running,
	// charged up to the last pass. Its running jobs' rate times it.
	Unrecorded float64
	// Period and BootUsage: usage charged before slurmctld's last start
	// was charged at the passes of the boots before, whose phase nobody
	// keeps, and weighs by them (a second charged at a pass Δ after the
	// one before weighs d^Δ·d^(since that pass): fairshare.Passes.JobUsageIn),
	// so each of its seconds may weigh up to d^∓Period against the phase
	// of today's passes. BootUsage is that usage per association of DB,
	// decayed to the report (nil: slurmctld's boot unknown, all of it may
	// be); Period is PriorityCalcPeriod in seconds (0: not considered).
	Period    float64
	BootUsage []float64
	// Unpriced is, per association of DB, what slurmctld may have charged
	// beyond the recorded billing of the jobs whose billing slurm.conf's
	// weights do not give (nil: none).
	Unpriced []float64
}

// Tails are finished jobs' uncharged tails cut at passes whose moment is
// known to Window seconds: each association's may be off by
// min(Window·Rate, Most) (usage.TailRisk). The tails of jobs that ended
// since slurmctld last started were cut at passes of its schedule now,
// whose phase is known; those before it, at a phase it no longer keeps.
type Tails struct {
	Window     float64
	Rate, Most []float64
}

// FactorBounds is how far each association's factor, vals computed under
// alg on t, may be from slurmctld's for what e leaves unknown of t's usage
// and resolution more (sshare's integer RawUsage: 1): the first-order
// bound of classic's FairShare, the rank range under Fair Tree, which it
// sets in vals (RankMin/RankMax; ties keep slurmctld's order when
// tieOrderKnown, and their range otherwise).
func (e PassError) FactorBounds(t *fairshare.Tree, alg fairshare.Algorithm, vals []fairshare.Values, resolution, damp float64, tieOrderKnown bool) []float64 {
	return factorBounds(t, e.Parts(t), alg, vals, resolution, damp, tieOrderKnown, 0)
}

// factorBounds is FactorBounds from parts, e.Parts(t), each account's
// usage known to accountTol of it more (relative): the usage part judges
// an account ok within the usage tolerance, so the order of sibling
// accounts that much apart is not known either, and a swap of them moves
// every user below (Fair Tree ranks users account by account, down the
// path: RankIntervals carries the ancestors' overlaps to them).
func factorBounds(t *fairshare.Tree, parts []result.UsageBound, alg fairshare.Algorithm, vals []fairshare.Values, resolution, damp float64, tieOrderKnown bool, accountTol float64) []float64 {
	extra := charge(parts)
	for i := range extra {
		if a := t.Association(i); !a.IsUser() {
			extra[i] += accountTol * a.RawUsage
		}
	}
	b := t.UsageBounds(alg, vals, resolution, extra, damp)
	out := make([]float64, len(b))
	if alg != fairshare.AlgorithmFairTree {
		for i := range b {
			out[i] = b[i].FairShare
		}
		return out
	}
	lfsErr := make([]float64, len(b))
	for i := range b {
		lfsErr[i] = b[i].LevelFS
		if tieOrderKnown {
			vals[i].RankMin, vals[i].RankMax = vals[i].Rank, vals[i].Rank
		}
	}
	lo, hi := t.RankIntervals(vals, lfsErr)
	for i := range vals {
		if a := t.Association(i); a.IsUser() {
			vals[i].RankMin, vals[i].RankMax = lo[i], hi[i]
			out[i] = vals[i].RankSpread(t.Users())
		}
	}
	return out
}

// charge is, per association, the part of its RawUsage bound (parts)
// that factors see: usage U at one pass is s·U + c at the other, s
// within d^±Window (decay, the same for every association, so it cancels
// in every ratio the algorithms take) and |c| at most the running charge
// over the window, decayed, and what finished jobs' tails may be off.
func charge(parts []result.UsageBound) []float64 {
	c := make([]float64, len(parts))
	for i, p := range parts {
		c[i] = p.Running + p.Unrecorded + p.Tails + p.EarlierBoots + p.Unpriced
	}
	return c
}

// Parts are, per association of t, bounds' RawUsage bound split by what
// leaves it unknown (without sshare's truncation, the reported side's).
func (e PassError) Parts(t *fairshare.Tree) []result.UsageBound {
	parts := make([]result.UsageBound, t.Len())
	if e.Window <= 0 && e.Unrecorded <= 0 && e.TailLost == nil && e.Tails == nil && e.Period <= 0 && e.Unpriced == nil {
		return parts
	}
	scale, boots := 1.0, 0.0
	if e.Decay > 0 && e.Decay < 1 {
		scale, boots = math.Pow(e.Decay, -e.Window), math.Pow(e.Decay, -e.Period)-1
	}
	for i := range parts {
		p := &parts[i]
		if e.Running != nil {
			p.Running = e.Running[i] * e.Window * scale
			p.Unrecorded = e.Running[i] * e.Unrecorded
		}
		for _, tl := range e.Tails {
			p.Tails += min(tl.Window*tl.Rate[i], tl.Most[i])
		}
		if e.TailLost != nil {
			p.Tails += e.TailLost[i]
		}
		if e.Unpriced != nil {
			p.Unpriced = e.Unpriced[i]
		}
		u := t.Association(i).RawUsage
		p.Decay = u * (scale - 1)
		if e.BootUsage != nil {
			u = min(u, e.BootUsage[i])
		}
		p.EarlierBoots = u * boots
	}
	return parts
}

// Comparison is the one definition of drift, which serve's metrics and
// check's output both show. It has two parts:
//   - formula drift: Slurm's values against the algorithm replayed on
//     Slurm's own usage (did slurmctld compute what its inputs give?);
//   - usage drift: the database's usage against Slurm's, and what the
//     difference does to the factor and the Fair Tree rank (does
//     slurmctld hold the usage the database records?), with shares and
//     the associations present on either side.
type Comparison struct {
	// Applied is the algorithm the report shows slurmctld applies.
	Applied fairshare.Algorithm
	// Drift sums both parts up per kind and value (the metrics).
	Drift []result.Drift
	// Formula and Usage are the parts association by association: only
	// with entries, Usage only with a database.
	Formula, Usage *Report
	// Lag says why the one-pass lag was inferred (Input.InferLag); empty
	// when it was not.
	Lag string
	// Named are the Input.Named associations drifting the most on usage,
	// with entries or without.
	Named []result.DriftAssociation
	// rows are the report's rows; row indexes them by association, the
	// last of rows sharing a key (Row).
	rows []shares.Row
	row  map[Key]int
}

// Row is the report's row of association k (nil: none): of the rows of one
// user in several partitions without sshare -m, which share a key, the
// last.
func (c *Comparison) Row(k Key) *shares.Row {
	if i, ok := c.row[k]; ok {
		return &c.rows[i]
	}
	return nil
}

// CompareReport compares in.Report with its replay and, given in.DB, with
// the database. entries keeps every association's entry (check prints
// them); without, only the sums are made (serve, at every report).
func CompareReport(in Input, entries bool) (*Comparison, error) {
	out := in.Report
	rt, err := out.Tree()
	if err != nil {
		return nil, err
	}
	replay, err := rt.Compute(in.Algorithm, in.Dampening)
	if err != nil {
		return nil, err
	}
	c := &Comparison{Applied: applied(out, rt, in.Algorithm), rows: out.Rows, row: make(map[Key]int, len(out.Rows))}
	for i := range out.Rows {
		r := &out.Rows[i]
		c.row[Key{Account: r.Account, User: r.User, Partition: r.Partition}] = i
	}
	reported, replayed, err := c.compareFormula(&in, rt, replay, entries)
	if err != nil {
		return nil, err
	}
	if in.DB == nil {
		return c, nil
	}
	if err := oneEach(out, in.DB); err != nil {
		return nil, err
	}
	if err := c.compareUsage(&in, rt, replay, replayed, reported, entries); err != nil {
		return nil, err
	}
	return c, nil
}

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
	byKey, byUser := map[Key]int{}, map[Key]int{}
	for i := range t.Len() {
		a := t.Association(i)
		byKey[Key{a.Account, a.User, a.Partition}]++
		if a.User != "" {
			byUser[Key{a.Account, a.User, ""}]++
		}
	}
	partitions := out.Has(shares.Partition)
	var bad []string
	for i := range out.Rows {
		r := &out.Rows[i]
		k, n := Key{r.Account, r.User, r.Partition}, byKey[Key{r.Account, r.User, r.Partition}]
		if r.User != "" && r.Partition == "" && (!partitions || n == 0) {
			k, n = Key{r.Account, r.User, ""}, byUser[Key{r.Account, r.User, ""}]
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
func candidates(t *fairshare.Tree, k Key) []string {
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

// compareFormula is the formula part: the report's values against its
// replay on the report's own usage, within what the replay's unknowns
// explain (the report's precision, a lag of one pass, the usage at the
// last pass); and, under Fair Tree, the ranks. While slurmctld settles
// after a restart (in.Settling) the drift is measured but not judged. It
// returns the sides it compared, which the usage part takes over.
func (c *Comparison) compareFormula(in *Input, rt *fairshare.Tree, replay []fairshare.Values, entries bool) (reported, replayed []Side, err error) {
	out, alg, damp, tol := in.Report, in.Algorithm, in.Dampening, in.Tolerance
	bounds := rt.UsageBounds(alg, replay, shares.UsageResolution, in.passGapCharge(rt), damp)
	if alg == fairshare.AlgorithmClassic && in.PrevRaw != nil {
		widenForLag(rt, replay, bounds, in.PrevRaw, damp)
	}
	var atPass []fairshare.Values // the replay on the usage at the last pass
	if in.PassRaw != nil {
		if atPass, err = widenForPass(rt, replay, bounds, in.PassRaw, alg, damp); err != nil {
			return nil, nil, err
		}
	}
	reported, replayed = reportedSides(out), FromTree(rt, replay, bounds)
	formula := c.part(alg, allowance{tolerance: tol.Formula}, reported, replayed, entries, &c.Formula, nil)
	if entries {
		c.noteNotYetComputed(out)
		if in.InferLag && in.PrevRaw == nil && alg == fairshare.AlgorithmClassic {
			c.Lag = inferLag(out, rt, bounds, damp, tol.Formula, c.Formula)
		}
	}
	c.appendFormulaDrift(formula)
	if alg == fairshare.AlgorithmFairTree {
		c.Drift = append(c.Drift, c.formulaRanks(out, rt, replay, atPass))
	}
	// Associations added since slurmctld's last pass: it prints its
	// siblings' NormShares anew at once but the values of its last pass,
	// computed on the tree before them (a healthy series
	// flagged 11 associations at that read), and ranks the new ones only
	// at its next pass.
	added := slices.ContainsFunc(out.Rows, func(r shares.Row) bool { return notYetComputed(out, &r) })
	if in.Settling || added {
		for i := range c.Drift {
			c.Drift[i].Bound, c.Drift[i].Beyond = math.Inf(1), 0
		}
	}
	if added && c.Formula != nil {
		c.Formula.unjudge("not judged: associations were added since slurmctld's last decay pass, whose values are of the tree before them")
	}
	return reported, replayed, nil
}

// unjudge makes r's drifting entries ok, noting why: their drift is
// measured, not judged.
func (r *Report) unjudge(why string) {
	for i := range r.Associations {
		if e := &r.Associations[i]; e.Status == StatusDrift {
			e.Status = StatusOK
			e.Notes = append(e.Notes, why)
			r.Summary.Counts[StatusDrift]--
			r.Summary.Counts[StatusOK]++
		}
	}
	clear(r.Summary.Beyond)
}

// reportedSides are the report's rows as sides, with the values of the
// rows slurmctld has not computed yet blank.
func reportedSides(out *shares.Table) []Side {
	reported := FromSshare(out)
	for i := range reported {
		if notYetComputed(out, &out.Rows[i]) {
			v := &reported[i].Values
			v.EffectiveUsage, v.FairShare, v.LevelFS = Num(math.NaN()), Num(math.NaN()), Num(math.NaN())
		}
	}
	return reported
}

// noteNotYetComputed counts and notes the formula entries of the rows
// slurmctld has not computed yet.
func (c *Comparison) noteNotYetComputed(out *shares.Table) {
	for i := range out.Rows {
		if notYetComputed(out, &out.Rows[i]) && i < len(c.Formula.Associations) {
			c.Formula.Summary.NotYetComputed++
			e := &c.Formula.Associations[i]
			e.Notes = append(e.Notes, "not yet computed by slurmctld (added since its last decay pass): its factor is not compared")
		}
	}
}

// appendFormulaDrift adds the formula part's largest drift and bound of
// each value but raw usage (the replay's input).
func (c *Comparison) appendFormulaDrift(formula Summary) {
	m, b := formula.MaxDrift, formula.MaxBound
	for k, v := range []Num{m.NormShares, m.NormUsage, m.EffectiveUsage, m.FairShare, m.LevelFS} {
		name := []string{"norm_shares", "norm_usage", "effective_usage", "fairshare", "level_fs"}[k]
		bound := []Num{b.NormShares, b.NormUsage, b.EffectiveUsage, b.FairShare, b.LevelFS}[k]
		c.Drift = append(c.Drift, result.Drift{Kind: result.DriftFormula, Value: name, Max: math.Abs(float64(v)), Bound: float64(bound), Beyond: formula.Beyond[name]})
	}
}

// compareUsage is the usage part: the algorithm on the database's usage
// (in.DB) against the replay on the report's (usageSides, in the formula
// part's sides), and the shares, the associations present on either side
// and, under Fair Tree, the rank. The tolerances are the database's
// side's.
func (c *Comparison) compareUsage(in *Input, rt *fairshare.Tree, replay []fairshare.Values, replayed, spare []Side, entries bool) error {
	alg, tol := in.Algorithm, in.Tolerance
	own, err := in.DB.Compute(alg, in.Dampening)
	if err != nil {
		return err
	}
	repSide, dbSide := usageSides(in, rt, replay, own, replayed, spare)
	al := allowance{margin: Values{FairShare: Num(tol.Factor)}, relative: Values{RawUsage: Num(tol.Usage)}}
	var w *worst
	if in.Named > 0 {
		w = &worst{n: in.Named}
	}
	usage := c.part(alg, al, repSide, dbSide, entries, &c.Usage, w)
	ev := in.evidence()
	if entries {
		noteUsageOrigin(c.Usage, ev, w)
	}
	if w != nil {
		c.Named = w.named(ev)
	}
	present := float64(usage.Counts[StatusOnlyReported] + usage.Counts[StatusOnlyComputed])
	c.Drift = append(c.Drift,
		result.Drift{Kind: result.DriftUsage, Value: "raw_usage", Max: float64(usage.MaxRelative.RawUsage), Bound: float64(usage.MaxRelativeBound.RawUsage), Beyond: usage.Beyond["raw_usage"]},
		result.Drift{Kind: result.DriftUsage, Value: "fairshare", Max: math.Abs(float64(usage.MaxDrift.FairShare)), Bound: float64(usage.MaxBound.FairShare), Beyond: usage.Beyond["fairshare"]},
		result.Drift{Kind: result.DriftUsage, Value: "associations", Max: present, Beyond: int(present)})
	fairTree := alg == fairshare.AlgorithmFairTree
	shareDrift, rankDrift := c.usagePairs(in.DB, own, rt, replay, fairTree)
	c.Drift = append(c.Drift, shareDrift)
	if fairTree {
		c.Drift = append(c.Drift, rankDrift)
	}
	return nil
}

// usageSides are the replay on the report's usage (rt, replay: the
// formula part's replayed sides, whose bounds they replace) and the
// algorithm on the database's (own), in spare's memory where it has
// room, as sides. The database's raw usage is known to within the charge
// the pass moment explains, and its factor to within that and the
// report's integer RawUsage; the other values follow from raw usage and
// are not judged.
func usageSides(in *Input, rt *fairshare.Tree, replay, own []fairshare.Values, replayed, spare []Side) (repSide, dbSide []Side) {
	parts := in.Pass.Parts(in.DB)
	factorErr := factorBounds(in.DB, parts, in.Algorithm, own, shares.UsageResolution, in.Dampening, in.TieOrderKnown, in.Tolerance.Usage)
	dbSide, repSide = fromTree(spare, in.DB, own, nil), replayed
	notJudged := Num(math.Inf(1)) // follow from raw usage; the factor and rank carry their effect
	for i := range dbSide {
		dbSide[i].Bound = Values{NormShares: notJudged, NormUsage: notJudged, EffectiveUsage: notJudged, LevelFS: notJudged,
			RawUsage: Num(parts[i].Total()), FairShare: Num(factorErr[i])}
		dbSide[i].Parts = &parts[i]
	}
	for j := range repSide {
		// sshare prints RawUsage truncated to an integer; the replay's
		// own tie order is unknown
		repSide[j].Bound = Values{RawUsage: shares.UsageResolution}
		if in.Algorithm == fairshare.AlgorithmFairTree && !in.TieOrderKnown {
			repSide[j].Bound.FairShare = Num(replay[j].RankSpread(rt.Users()))
		}
	}
	return repSide, dbSide
}

// part compares reported with computed under al, keeping the entries in
// *rep when asked, and offering w (nil: none) those beyond tolerance.
// Without entries, only those are made: few, so the comparison costs
// what a summary does.
func (c *Comparison) part(alg fairshare.Algorithm, al allowance, reported, computed []Side, entries bool, rep **Report, w *worst) Summary {
	if !entries {
		if w != nil {
			return al.compare(reported, computed, w.offer, true)
		}
		return al.compare(reported, computed, nil, false)
	}
	*rep = al.report(alg, reported, computed)
	return (*rep).Summary
}

// flag marks the entry of k in rep as drifting, for why; rep may be nil.
func flag(rep *Report, k Key, why string) {
	if rep == nil {
		return
	}
	for i := range rep.Associations {
		e := &rep.Associations[i]
		if e.Account == k.Account && e.User == k.User && e.Partition == k.Partition && e.Computed != nil && e.Reported != nil {
			flagEntry(rep, i, why)
			return
		}
	}
}

// flagEntry marks rep's entry i as drifting, for why.
func flagEntry(rep *Report, i int, why string) {
	e := &rep.Associations[i]
	if e.Status == StatusOK {
		e.Status = StatusDrift
		rep.Summary.Counts[StatusOK]--
		rep.Summary.Counts[StatusDrift]++
	}
	e.Notes = append(e.Notes, why)
}

// RawByKey is the report's RawUsage by association: what a later report
// takes as the usage before slurmctld's last decay pass (Input.PrevRaw).
func RawByKey(out *shares.Table) map[Key]float64 {
	raw := make(map[Key]float64, len(out.Rows))
	for _, r := range out.Rows {
		raw[Key{Account: r.Account, User: r.User, Partition: r.Partition}] = r.RawUsage
	}
	return raw
}

// RawOfTree is t's RawUsage by association, as RawByKey is a report's: a
// database's tree standing for the usage slurmctld computed a pass's
// values from (Input.PassRaw).
func RawOfTree(t *fairshare.Tree) map[Key]float64 {
	raw := make(map[Key]float64, t.Len())
	for i := range t.Len() {
		a := t.Association(i)
		raw[Key{Account: a.Account, User: a.User, Partition: a.Partition}] = a.RawUsage
	}
	return raw
}

// notYetComputed: slurmctld leaves NormUsage unset (blank) on
// associations added since its last decay pass, and their factor at 0 and
// LevelFS at 0 until the pass; that is not drift.
func notYetComputed(out *shares.Table, r *shares.Row) bool {
	return r.Depth > 0 && math.IsNaN(r.NormUsage) && out.Has(shares.NormUsage)
}

// rowsRaw is raw's RawUsage for each association of rt, rt's own where
// raw has none (an association added since).
func rowsRaw(rt *fairshare.Tree, raw map[Key]float64) []float64 {
	out := make([]float64, rt.Len())
	for i := range out {
		a := rt.Association(i)
		v, ok := raw[Key{Account: a.Account, User: a.User, Partition: a.Partition}]
		if !ok {
			v = a.RawUsage
		}
		out[i] = v
	}
	return out
}

// widenForLag allows each value to be anywhere between the replay and the
// replay lagged by one decay pass: slurmctld computes classic effective
// usage at the start of each pass.
func widenForLag(rt *fairshare.Tree, replay, bounds []fairshare.Values, prevRaw map[Key]float64, damp float64) {
	lagged := rt.ClassicLagged(rowsRaw(rt, prevRaw), damp)
	for i := range bounds {
		b, r, l := &bounds[i], &replay[i], &lagged[i]
		b.NormUsage += absDiff(r.NormUsage, l.NormUsage)
		b.EffectiveUsage += absDiff(r.EffectiveUsage, l.EffectiveUsage)
		b.FairShare += absDiff(r.FairShare, l.FairShare)
	}
}

// passGapCharge is, per row of rt, what jobs ending between slurmctld's
// pass and the read of PassRaw may have charged into it (nil: nothing to
// allow): their rate, from the database's running jobs, times PassGap.
// Without PassRaw (no pass seen since serve started) the report's own
// usage holds the ends charged since the pass (Pass.SincePass long):
// seen in the demo's first minutes, 21 Fair Tree level_fs beyond
// tolerance on a healthy cluster.
func (in *Input) passGapCharge(rt *fairshare.Tree) []float64 {
	gap := in.PassGap
	if in.PassRaw == nil {
		gap = in.Pass.SincePass
	}
	if gap <= 0 || in.DB == nil || in.Pass.Running == nil {
		return nil
	}
	rate := make(map[Key]float64, in.DB.Len())
	for i := range in.DB.Len() {
		a := in.DB.Association(i)
		rate[Key{Account: a.Account, User: a.User, Partition: a.Partition}] = in.Pass.Running[i]
	}
	extra := make([]float64, rt.Len())
	for i := range extra {
		a := rt.Association(i)
		extra[i] = rate[Key{Account: a.Account, User: a.User, Partition: a.Partition}] * gap
	}
	return extra
}

// widenForPass allows each value computed at slurmctld's last decay pass
// to be anywhere between the replay and the replay on the usage at that
// pass (Input.PassRaw), which it returns.
func widenForPass(rt *fairshare.Tree, replay, bounds []fairshare.Values, passRaw map[Key]float64, alg fairshare.Algorithm, damp float64) ([]fairshare.Values, error) {
	raw := rowsRaw(rt, passRaw)
	assocs := make([]fairshare.Association, rt.Len())
	for i := range assocs {
		assocs[i] = rt.Association(i)
		assocs[i].RawUsage = raw[i]
	}
	pt, err := fairshare.NewTree(assocs)
	if err != nil {
		return nil, err
	}
	at, err := pt.Compute(alg, damp)
	if err != nil {
		return nil, err
	}
	for i := range bounds {
		b, r, p := &bounds[i], &replay[i], &at[i]
		b.NormUsage += absDiff(r.NormUsage, p.NormUsage)
		b.EffectiveUsage += absDiff(r.EffectiveUsage, p.EffectiveUsage)
		b.FairShare += absDiff(r.FairShare, p.FairShare)
		if math.IsInf(r.LevelFS, 0) != math.IsInf(p.LevelFS, 0) {
			b.LevelFS = math.Inf(1)
		} else {
			b.LevelFS += absDiff(r.LevelFS, p.LevelFS)
		}
	}
	return at, nil
}

// printPrecision is how far a value sshare prints with %f (six decimals)
// can be from slurmctld's.
const printPrecision = 5e-7

// lagMoved are the values the one-pass lag moves (Fields' indexes).
var lagMoved = [6]bool{2: true, 3: true, 4: true}

// inferLag marks rep's drifting entries that slurmctld's one-pass lag
// explains as StatusLagNotExcluded (Input.InferLag) and says why the lag
// was inferred; nothing when the report shows no usage charged during the
// last pass. An entry is marked when every value it drifts on is one the
// lag moves (NormUsage, EffectvUsage, FairShare) and those three match
// fairshare.ClassicLagged on the usage at the pass's start: the accounts'
// reported NormUsage times root's RawUsage (users' usage does not enter).
// That usage is read, not checked: an account's NormUsage is not judged.
func inferLag(out *shares.Table, rt *fairshare.Tree, bounds []fairshare.Values, damp, tol float64, rep *Report) string {
	why := lagEvidence(out, rt, bounds, tol)
	if why == "" {
		return ""
	}
	n, root := rt.Len(), rt.Root()
	rootRaw := rt.Association(root).RawUsage
	prev := make([]float64, n)
	assocs := make([]fairshare.Association, n)
	for i := range n {
		a := rt.Association(i)
		if nu := out.Rows[i].NormUsage; !a.IsUser() && i != root && !math.IsNaN(nu) {
			a.RawUsage = nu * rootRaw
		}
		prev[i], assocs[i] = a.RawUsage, a
	}
	pt, err := fairshare.NewTree(assocs)
	if err != nil {
		return "" // the same tree as rt's: cannot happen
	}
	lagged := rt.ClassicLagged(prev, damp)
	// the usage at the pass's start is known to the NormUsage printed
	prevBounds := pt.UsageBounds(fairshare.AlgorithmClassic, pt.Classic(fairshare.ClassicOptions{Dampening: damp}), printPrecision*rootRaw+shares.UsageResolution, nil, damp)
	for i := range min(n, len(rep.Associations)) {
		e := &rep.Associations[i]
		if e.Status != StatusDrift || e.Computed == nil || e.Reported == nil || e.Drift == nil || e.Allowed == nil {
			continue
		}
		lv := FromFairshare(lagged[i])
		b, pb := FromFairshare(bounds[i]), FromFairshare(prevBounds[i])
		var d, allowed Values
		lf, rf, df, af := lv.fields(), e.Reported.fields(), d.fields(), allowed.fields()
		bf, pbf := b.fields(), pb.fields()
		driftF, allowedF := e.Drift.fields(), e.Allowed.fields()
		explained := true
		var beyond []int
		for k := range lf {
			*df[k] = Num(diff(float64(*lf[k]), float64(*rf[k])))
			*af[k] = Num(tol) + nonNaN(*bf[k]) + nonNaN(*pbf[k])
			if dk := float64(*driftF[k]); !math.IsNaN(dk) && math.Abs(dk) > float64(*allowedF[k]) {
				beyond = append(beyond, k)
				explained = explained && lagMoved[k]
			}
			if dk := float64(*df[k]); lagMoved[k] && !math.IsNaN(dk) && math.Abs(dk) > float64(*af[k]) {
				explained = false
			}
		}
		if !explained || len(beyond) == 0 {
			continue
		}
		e.Status = StatusLagNotExcluded
		e.Lag = &Lag{Computed: ref(lv), Drift: ref(d), Allowed: ref(allowed)}
		e.Notes = append(e.Notes, "lag not excluded: these are the values one decay pass behind")
		rep.Summary.Counts[StatusDrift]--
		rep.Summary.Counts[StatusLagNotExcluded]++
		for _, k := range beyond {
			rep.Summary.Beyond[Fields[k]]--
		}
	}
	return "no earlier report: classic values lag slurmctld's last decay pass while usage is charged (" + why +
		"); entries whose drift that lag explains, the accounts' NormUsage taken for the usage at the pass's start, are lag_not_excluded, not drift"
}

// lagEvidence says what in the report shows usage charged during
// slurmctld's last decay pass ("" if nothing): an account's NormUsage
// (computed at the pass's start) off its current RawUsage share beyond
// precision, or TRESRunMins not 0 (running jobs; slurmctld keeps it only
// with AccountingStorageEnforce=limits).
func lagEvidence(out *shares.Table, rt *fairshare.Tree, bounds []fairshare.Values, tol float64) string {
	var why []string
	root := rt.Root()
	rootRaw := rt.Association(root).RawUsage
	for i := range out.Rows {
		r := &out.Rows[i]
		if r.User != "" || i == root || math.IsNaN(r.NormUsage) || !(rootRaw > 0) {
			continue
		}
		if share := r.RawUsage / rootRaw; math.Abs(r.NormUsage-share) > tol+printPrecision+bounds[i].NormUsage {
			why = append(why, fmt.Sprintf("account %s: NormUsage %.6f, RawUsage share %.6f", r.Account, r.NormUsage, share))
			break
		}
	}
	for i := range out.Rows {
		if r := &out.Rows[i]; running(r.TRESRunMins) {
			who := r.Account
			if r.User != "" {
				who += "/" + r.User
			}
			why = append(why, fmt.Sprintf("TRESRunMins of %s: %s", who, r.TRESRunMins))
			break
		}
	}
	return strings.Join(why, "; ")
}

// running: a TRESRunMins cell (cpu=0,mem=0,...) has a count other than 0.
func running(tres string) bool {
	for _, kv := range strings.Split(tres, ",") {
		if _, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(v) != "0" && strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}

func nonNaN(n Num) Num {
	if math.IsNaN(float64(n)) {
		return 0
	}
	return n
}

func absDiff(a, b float64) float64 {
	d := math.Abs(a - b)
	if math.IsNaN(d) {
		return 0
	}
	return d
}

// formulaRanks compares Fair Tree ranks (FairShare × user associations:
// one swap moves FairShare by only 1/N) with the replay's rank range. The
// replay's tree has a node per row, in the rows' order: rows are taken by
// index, as two rows of one user in two partitions share a key without
// sshare -m.
func (c *Comparison) formulaRanks(out *shares.Table, rt *fairshare.Tree, replay, atPass []fairshare.Values) result.Drift {
	d := result.Drift{Kind: result.DriftFormula, Value: "rank"}
	users := float64(rt.Users())
	for i := range replay {
		a, r := rt.Association(i), &out.Rows[i]
		if !a.IsUser() || math.IsNaN(r.FairShare) || notYetComputed(out, r) {
			continue
		}
		rank := math.Round(r.FairShare * users)
		v := replay[i]
		if atPass != nil {
			// either usage's ranks
			v.RankMin = min(v.RankMin, v.RankMax, atPass[i].RankMin, atPass[i].RankMax)
			v.RankMax = max(replay[i].RankMin, v.RankMax, atPass[i].RankMin, atPass[i].RankMax)
		}
		off := rankOutside(rank, v)
		d.Max = math.Max(d.Max, off)
		if off > 0 {
			d.Beyond++
			if c.Formula != nil {
				// entries follow the report's rows
				flagEntry(c.Formula, i, fmt.Sprintf("rank %.0f reported, %s replayed", rank, rankRange(v)))
			}
		}
	}
	return d
}

// rankOutside is how far rank lies outside v's rank range.
func rankOutside(rank float64, v fairshare.Values) float64 {
	lo, hi := float64(min(v.RankMin, v.RankMax)), float64(max(v.RankMin, v.RankMax))
	return math.Max(0, math.Max(lo-rank, rank-hi))
}

func rankRange(v fairshare.Values) string {
	lo, hi := min(v.RankMin, v.RankMax), max(v.RankMin, v.RankMax)
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// usagePairs compares what Values do not hold, association by
// association: shares, and under Fair Tree the rank the database's usage
// gives against the one Slurm's usage gives. rt's nodes are the report's
// rows, in order.
func (c *Comparison) usagePairs(t *fairshare.Tree, own []fairshare.Values, rt *fairshare.Tree, replay []fairshare.Values, fairTree bool) (shares, rank result.Drift) {
	shares = result.Drift{Kind: result.DriftUsage, Value: "shares"}
	rank = result.Drift{Kind: result.DriftUsage, Value: "rank"}
	for i := range t.Len() {
		a := t.Association(i)
		k := Key{Account: a.Account, User: a.User, Partition: a.Partition}
		j, ok := c.row[k]
		if !ok {
			continue
		}
		r := rt.Association(j)
		if a.Shares != r.Shares && a.Parent >= 0 {
			shares.Beyond++
			shares.Max = math.Max(shares.Max, math.Abs(float64(a.Shares)-float64(r.Shares)))
			flag(c.Usage, k, fmt.Sprintf("shares %d in the database, %d in Slurm", a.Shares, r.Shares))
		}
		if fairTree && a.IsUser() {
			// own's range holds the usage error (RankIntervals), and its
			// ties unless their order is known
			off := rankOutside(float64(replay[j].Rank), own[i])
			// the replay's own tie order is unknown too
			off = math.Max(0, off-float64(replay[j].RankMax-replay[j].RankMin))
			rank.Max = math.Max(rank.Max, off)
			if off > 0 {
				rank.Beyond++
				flag(c.Usage, k, fmt.Sprintf("rank %s from the database's usage, %s from Slurm's", rankRange(own[i]), rankRange(replay[j])))
			}
		}
	}
	return shares, rank
}

// applied infers the algorithm slurmctld applies from its report: a
// LevelFS column is Fair Tree; otherwise classic normalizes shares over
// the whole cluster and Fair Tree among siblings (what slurmctld keeps
// computing from when PriorityFlags change without a restart).
func applied(out *shares.Table, rt *fairshare.Tree, configured fairshare.Algorithm) fairshare.Algorithm {
	if shown := out.Algorithm(); shown == fairshare.AlgorithmFairTree {
		return shown
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

// noteUsageOrigin says where usage drift comes from: an account's RawUsage
// is the sum of its subtree's, so an account whose difference its users'
// differences make up drifts only through them; a user, or an
// association on one side only, gets what the evidence supports
// (diagnose), and is offered to w (nil: none).
func noteUsageOrigin(rep *Report, ev *evidence, w *worst) {
	sum := map[string]float64{}     // per account: its users' differences
	largest := map[string]*Entry{}  // per account: the user that differs most
	accounts := map[string]string{} // account → parent account
	for i := range rep.Associations {
		e := &rep.Associations[i]
		if e.User == "" {
			accounts[e.Account] = e.Parent
		}
	}
	for i := range rep.Associations {
		e := &rep.Associations[i]
		if e.Status != StatusOK && (e.User != "" || e.Drift == nil) {
			_, note := diagnose(e, ev)
			e.Notes = append(e.Notes, note)
			if w != nil {
				w.offer(*e)
			}
		}
		if e.User == "" || e.Drift == nil {
			continue
		}
		d := float64(e.Drift.RawUsage)
		for a, seen := e.Account, 0; a != "" && seen <= len(accounts); a, seen = accounts[a], seen+1 {
			sum[a] += d
			if l := largest[a]; l == nil || math.Abs(d) > math.Abs(float64(l.Drift.RawUsage)) {
				largest[a] = e
			}
		}
	}
	for i := range rep.Associations {
		e := &rep.Associations[i]
		if e.User != "" || e.Drift == nil || e.Allowed == nil {
			continue
		}
		d, allowed, l := float64(e.Drift.RawUsage), float64(e.Allowed.RawUsage), largest[e.Account]
		if math.Abs(d) > allowed && l != nil && math.Abs(d-sum[e.Account]) <= allowed {
			e.Notes = append(e.Notes, fmt.Sprintf("follows from its users' usage (%+.0f, most of it %s/%s)", sum[e.Account], l.Account, l.User))
		}
	}
}
