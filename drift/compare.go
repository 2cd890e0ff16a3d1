package drift

import (
	"math"
	"slices"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

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
	row  map[result.AssocKey]int
}

// Row is the report's row of association k (nil: none): of the rows of one
// user in several partitions without sshare -m, which share a key, the
// last.
func (c *Comparison) Row(k result.AssocKey) *shares.Row {
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
	c := &Comparison{Applied: applied(out, rt, in.Algorithm), rows: out.Rows, row: make(map[result.AssocKey]int, len(out.Rows))}
	for i := range out.Rows {
		r := &out.Rows[i]
		c.row[result.KeyOf(r.Account, r.User, r.Partition)] = i
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
	if in.Settling {
		// slurmctld started since its last pass seen: the jobs it ran
		// while slurmdbd could not record them reach the database only
		// after it registers (the starts it sends anew,
		// send_jobs_to_accounting; the messages it saved, dbd.messages),
		// so it may hold more than the database, by any amount, and the
		// factors and ranks follow. Less is usage lost across the
		// restart: judged at once.
		al.excess.RawUsage = Num(math.Inf(1))
		al.margin.FairShare = Num(math.Inf(1))
	}
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
	shareDrift, rankDrift := c.usagePairs(in.DB, own, rt, replay, fairTree, in.Settling)
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
func flag(rep *Report, k result.AssocKey, why string) {
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

// notYetComputed: slurmctld leaves NormUsage unset (blank) on
// associations added since its last decay pass, and their factor at 0 and
// LevelFS at 0 until the pass; that is not drift.
func notYetComputed(out *shares.Table, r *shares.Row) bool {
	return r.Depth > 0 && math.IsNaN(r.NormUsage) && out.Has(shares.NormUsage)
}
