package drift

import (
	"fmt"
	"math"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// widenForLag allows each value to be anywhere between the replay and the
// replay lagged by one decay pass: slurmctld computes classic effective
// usage at the start of each pass.
func widenForLag(rt *fairshare.Tree, replay, bounds []fairshare.Values, prevRaw map[result.AssocKey]float64, damp float64) {
	lagged := rt.ClassicLagged(rowsRaw(rt, prevRaw), damp)
	for i := range bounds {
		b, r, l := &bounds[i], &replay[i], &lagged[i]
		b.NormUsage += absDiff(r.NormUsage, l.NormUsage)
		b.EffectiveUsage += absDiff(r.EffectiveUsage, l.EffectiveUsage)
		b.FairShare += absDiff(r.FairShare, l.FairShare)
	}
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
