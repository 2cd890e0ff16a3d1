package drift

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// Causes of a user association's usage drift: the short form of the
// note diagnose writes, the cause label of
// slurmdbd_fairshare_drift_association.
const (
	// CauseReset: the exporter saw the association's RawUsage fall by
	// more than decay explains between two reads of one slurmctld boot.
	CauseReset = "reset"
	// CauseRestart: it fell across a restart of slurmctld, or slurmctld
	// restarted with no read before to compare.
	CauseRestart = "restart"
	// CauseBillingRounding: slurmctld holds more, and the association ran
	// jobs whose billing the database holds truncated.
	CauseBillingRounding = "billing_rounding"
	// CauseOthersUsage: its own usage agrees; its factor moves with
	// others' usage drift.
	CauseOthersUsage = "others_usage"
	// CauseOnlyDatabase and CauseOnlySlurmctld: the association is on one
	// side only.
	CauseOnlyDatabase  = "only_database"
	CauseOnlySlurmctld = "only_slurmctld"
	// CauseUnexplained: none of the evidence above.
	CauseUnexplained = "unexplained"
)

// Causes are the causes, in the order the metrics document them.
var Causes = []string{CauseReset, CauseRestart, CauseBillingRounding, CauseOthersUsage, CauseOnlyDatabase, CauseOnlySlurmctld, CauseUnexplained}

// evidence is what a comparison knows besides the two sides' numbers.
type evidence struct {
	// losses by association (nil: no reads were compared, as in check)
	losses   map[result.AssocKey]result.UsageLoss
	settling bool
}

func (in *Input) evidence() *evidence {
	ev := &evidence{settling: in.Settling}
	if in.Losses != nil {
		ev.losses = make(map[result.AssocKey]result.UsageLoss, len(in.Losses))
		for _, l := range in.Losses {
			ev.losses[l.AssocKey] = l
		}
	}
	return ev
}

// diagnose says what the numbers support of a usage entry beyond
// tolerance: its cause and the note check prints. It blames a reset only
// on a loss the exporter saw: the database records no reset, so a gap
// alone cannot tell a reset from other causes.
func diagnose(e *Entry, ev *evidence) (cause, note string) {
	switch e.Status {
	case StatusOnlyComputed:
		return CauseOnlyDatabase, "in the database, not in slurmctld's report: added since slurmctld last loaded its associations, or removed from slurmctld alone"
	case StatusOnlyReported:
		return CauseOnlySlurmctld, "in slurmctld's report, not among the database's associations: removed from the database (sacctmgr delete) while slurmctld still holds it"
	}
	d, allowed := float64(e.Drift.RawUsage), float64(e.Allowed.RawUsage)
	if !(math.Abs(d) > allowed) {
		return CauseOthersUsage, "its own usage agrees within what is allowed: its factor moves with other associations' usage drift"
	}
	gap := gapNote(e)
	if l, ok := ev.losses[result.KeyOf(e.Account, e.User, e.Partition)]; ok && d > 0 {
		at := l.At.UTC().Format("2006-01-02T15:04:05Z")
		if l.Kind == result.LossAcrossRestart {
			return CauseRestart, gap + ": its RawUsage fell across slurmctld's restart (read at " + at + "): slurmctld started from an older checkpoint or without its assoc_usage state"
		}
		return CauseReset, gap + ": its RawUsage fell by more than decay explains between two reads (at " + at + "): usage reset in slurmctld (sacctmgr ... set RawUsage=0, which the database does not record) or lost"
	}
	if d > 0 && ev.settling {
		return CauseRestart, gap + ": slurmctld restarted since its last decay pass seen, with no read before to compare: it may have started from an older checkpoint"
	}
	if p := e.BoundParts; d < 0 && p != nil && p.Unpriced > 0 {
		return CauseBillingRounding, gap + fmt.Sprintf(": it ran jobs billed by weights slurm.conf does not give, whose billing the database holds truncated while slurmctld charged the fraction (the bound allows %.0f of it)", p.Unpriced)
	}
	checked := "a restart or billing rounding (no earlier read of slurmctld to show a loss)"
	if ev.losses != nil {
		checked = "a loss seen between reads, a restart or billing rounding"
	}
	return CauseUnexplained, gap + ": not explained by " + checked
}

// gapNote is how much less (or more) usage slurmctld holds than the
// database records, in billing-seconds and relative to the larger.
func gapNote(e *Entry) string {
	d := float64(e.Drift.RawUsage)
	larger := math.Max(math.Abs(float64(e.Computed.RawUsage)), math.Abs(float64(e.Reported.RawUsage)))
	side := "less"
	if d < 0 {
		side = "more"
	}
	return fmt.Sprintf("slurmctld holds %.0f billing-seconds %s than the database records (%.1f%%)", math.Abs(d), side, 100*math.Abs(d)/math.Max(larger, 1))
}

// worst keeps, of the usage entries beyond tolerance it is offered, the n
// user associations and associations on one side only that drift the
// most: accounts drift through their users, who are named instead. n is
// small (10 by default), so a scan for the least beats a heap.
type worst struct {
	n        int
	entries  []Entry
	severity []float64
}

func (w *worst) offer(e Entry) {
	oneSide := e.Drift == nil
	if e.User == "" && !oneSide {
		return
	}
	s := severity(&e)
	if s == 0 {
		return // within what is allowed: nothing to name
	}
	if len(w.entries) < w.n {
		w.entries, w.severity = append(w.entries, e), append(w.severity, s)
		return
	}
	least := 0
	for i := range w.severity {
		if w.severity[i] < w.severity[least] {
			least = i
		}
	}
	if s > w.severity[least] {
		w.entries[least], w.severity[least] = e, s
	}
}

// severity is how many times what is allowed an entry drifts, on its
// worst value; on one side only, +Inf.
func severity(e *Entry) float64 {
	if e.Drift == nil || e.Allowed == nil {
		return math.Inf(1)
	}
	s := 0.0
	df, af := e.Drift.fields(), e.Allowed.fields()
	for k := range df {
		d, a := math.Abs(float64(*df[k])), float64(*af[k])
		if d > a && !math.IsNaN(d) {
			s = math.Max(s, d/math.Max(a, 1e-12))
		}
	}
	return s
}

// named are w's entries as series, the worst first: one per value beyond
// what is allowed, raw_usage relative to the larger side as drift_max's.
func (w *worst) named(ev *evidence) []result.DriftAssociation {
	order := make([]int, len(w.entries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := &w.entries[a], &w.entries[b]
		return cmp.Or(cmp.Compare(w.severity[b], w.severity[a]), strings.Compare(ea.Account, eb.Account), strings.Compare(ea.User, eb.User), strings.Compare(ea.Partition, eb.Partition))
	})
	var out []result.DriftAssociation
	for _, i := range order {
		e := &w.entries[i]
		cause, _ := diagnose(e, ev)
		n := result.DriftAssociation{AssocKey: result.KeyOf(e.Account, e.User, e.Partition), Kind: result.DriftUsage, Cause: cause}
		if e.Drift == nil {
			n.Value, n.Drift = "associations", 1
			out = append(out, n)
			continue
		}
		larger := math.Max(math.Max(math.Abs(float64(e.Computed.RawUsage)), math.Abs(float64(e.Reported.RawUsage))), 1)
		if d := float64(e.Drift.RawUsage); math.Abs(d) > float64(e.Allowed.RawUsage) {
			n.Value, n.Drift, n.Bound = "raw_usage", d/larger, math.Min(float64(e.Bound.RawUsage)/larger, 1)
			out = append(out, n)
		}
		if d := float64(e.Drift.FairShare); math.Abs(d) > float64(e.Allowed.FairShare) {
			n.Value, n.Drift, n.Bound = "fairshare", d, float64(e.Bound.FairShare)
			out = append(out, n)
		}
	}
	return out
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
