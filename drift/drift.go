// Package drift compares the fairshare values the exporter computes with the
// ones Slurm reports, association by association.
package drift

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// Status of one association in a comparison.
type Status string

const (
	StatusOK           Status = "ok"
	StatusDrift        Status = "drift"
	StatusOnlyReported Status = "only_reported"
	StatusOnlyComputed Status = "only_computed"
	// StatusLagNotExcluded: the values drift from the replay, but they are
	// what slurmctld shows one decay pass behind, and with no earlier
	// report that lag cannot be told from drift (Input.InferLag). Not
	// counted as drift.
	StatusLagNotExcluded Status = "lag_not_excluded"
)

// Statuses in the order reports list them.
var Statuses = []Status{StatusOK, StatusDrift, StatusOnlyReported, StatusOnlyComputed, StatusLagNotExcluded}

// Num is a value that may be blank (NaN: JSON null) or infinite (JSON
// "inf"/"-inf", which JSON numbers cannot hold).
type Num float64

// MarshalJSON writes null, "inf", "-inf" or the shortest exact number.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (n *Num) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "null":
		*n = Num(math.NaN())
		return nil
	case `"inf"`:
		*n = Num(math.Inf(1))
		return nil
	case `"-inf"`:
		*n = Num(math.Inf(-1))
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// Values are the compared quantities, with the JSON names of the check
// command's public contract.
type Values struct {
	NormShares     Num `json:"norm_shares"`
	RawUsage       Num `json:"raw_usage"`
	NormUsage      Num `json:"norm_usage"`
	EffectiveUsage Num `json:"effective_usage"`
	FairShare      Num `json:"fairshare"`
	LevelFS        Num `json:"level_fs"`
}

// Fields are the compared quantities by JSON name, in contract order.
var Fields = []string{"norm_shares", "raw_usage", "norm_usage", "effective_usage", "fairshare", "level_fs"}

func (v *Values) fields() [6]*Num {
	return [6]*Num{&v.NormShares, &v.RawUsage, &v.NormUsage, &v.EffectiveUsage, &v.FairShare, &v.LevelFS}
}

// FromFairshare converts computed values.
func FromFairshare(f fairshare.Values) Values {
	return Values{Num(f.NormShares), Num(f.RawUsage), Num(f.NormUsage), Num(f.EffectiveUsage), Num(f.FairShare), Num(f.LevelFS)}
}

// Entry is one association in a comparison. Parent and Depth describe the
// real tree, before FairShare=parent flattening.
type Entry struct {
	Account   string `json:"account"`
	User      string `json:"user"`
	Partition string `json:"partition"`
	Parent    string `json:"parent"`
	Depth     int    `json:"depth"`
	Status    Status `json:"status"`
	// Computed, Reported and Drift are null for an association that only
	// one side has. A value is null where its side left it blank; Drift =
	// computed - reported, 0 when both are the same infinity.
	Computed *Values `json:"computed"`
	Reported *Values `json:"reported"`
	Drift    *Values `json:"drift"`
	// Allowed is the drift each value may show and still be ok: the
	// bound plus the tolerance. Bound is what the inputs' unknowns
	// explain: print precision, RawUsage truncation, the charge and decay
	// between two possible decay-pass moments, rank ranges (infinite:
	// the value is not judged).
	Allowed *Values `json:"allowed,omitempty"`
	Bound   *Values `json:"bound,omitempty"`
	// BoundParts is what the RawUsage bound is made of, beside a
	// comparison with the database: why the value is uncertain.
	BoundParts *result.UsageBound `json:"bound_parts,omitempty"`
	// Notes say what else drifts (shares, a Fair Tree rank), or why a
	// value is not judged.
	Notes []string `json:"notes,omitempty"`
	// Lag is, on a StatusLagNotExcluded entry, the one-pass-lag model it
	// matches.
	Lag *Lag `json:"lag,omitempty"`
}

// Lag is slurmctld's classic values one decay pass behind, an entry
// against them, and what is allowed: the tolerance plus what the inputs'
// precision explains, the usage at the start of that pass included (read
// from the report's accounts' NormUsage, printed to six decimals).
type Lag struct {
	Computed *Values `json:"computed"`
	Drift    *Values `json:"drift"`
	Allowed  *Values `json:"allowed"`
}

// Side is one source's view of an association.
type Side struct {
	Key    result.AssocKey
	Parent string
	Depth  int
	Values Values
	// Bound is how uncertain each value is on this side (0 if exact):
	// what its unknowns explain.
	Bound Values
	// Parts is what the computed side's RawUsage bound is made of (nil:
	// none is told).
	Parts *result.UsageBound
}

// Summary counts entries by status and records the largest drift per
// value, over associations present on both sides.
type Summary struct {
	Counts   map[Status]int `json:"counts"`
	MaxDrift Values         `json:"max_drift"`
	// MaxRelative is the largest drift relative to the larger of the two
	// values (at least 1).
	MaxRelative Values `json:"max_relative_drift"`
	// MaxBound and MaxRelativeBound are the largest bound (Entry.Bound),
	// absolute and relative like MaxDrift and MaxRelative: how much drift
	// the unknowns could explain somewhere in the comparison.
	MaxBound         Values `json:"max_bound"`
	MaxRelativeBound Values `json:"max_relative_bound"`
	// Beyond counts, per value, the associations whose drift exceeds what
	// is allowed.
	Beyond map[string]int `json:"beyond"`
	// NotYetComputed counts the associations slurmctld has not computed
	// since they were added (blank NormUsage until its next decay pass):
	// their factor is not compared.
	NotYetComputed int `json:"not_yet_computed,omitempty"`
}

// Report is a whole comparison; its JSON is the check command's output.
type Report struct {
	Algorithm    fairshare.Algorithm `json:"algorithm"`
	Tolerance    float64             `json:"tolerance"`
	Note         string              `json:"note,omitempty"`
	Summary      Summary             `json:"summary"`
	Associations []Entry             `json:"associations"`
	// Formula is, beside a comparison with the database, Slurm's values
	// against the algorithm replayed on Slurm's own usage.
	Formula *Report `json:"formula,omitempty"`
	// Phase is, beside a comparison with the database, what was known of
	// the moment of slurmctld's decay passes.
	Phase *result.Phase `json:"phase,omitempty"`
	// Billing is, beside a comparison with the database, the check of
	// slurmctld's recorded billing against slurm.conf's weights, per
	// partition (result.Cluster.Billing).
	Billing []result.Billing `json:"billing,omitempty"`
}

// Compare matches reported and computed associations by key. Entries follow
// the reported order, then computed-only associations in computed order. A
// value drifts when |computed - reported| exceeds tolerance plus both
// sides' bounds; a value blank on either side is not compared.
func Compare(alg fairshare.Algorithm, tolerance float64, reported, computed []Side) *Report {
	return allowance{tolerance: tolerance}.report(alg, reported, computed)
}

// Summarize is Compare's summary alone: the exporter compares 100k
// associations at every report, and the entries were a third of the
// comparison's garbage (BenchmarkCompare100k).
func Summarize(tolerance float64, reported, computed []Side) Summary {
	return allowance{tolerance: tolerance}.compare(reported, computed, nil, false)
}

// allowance is what a comparison allows beyond both sides' bounds: the
// tolerance on every value, margin more (absolute) and relative more (a
// fraction of the larger of the two values compared), value by value. It
// is the comparison's, not each side's: sides come 100k at a time.
type allowance struct {
	tolerance        float64
	margin, relative Values
	// excess is how much more than computed the reported value may be
	// beside what is allowed either way
	excess Values
}

// report is Compare under al.
func (al allowance) report(alg fairshare.Algorithm, reported, computed []Side) *Report {
	r := &Report{Algorithm: alg, Tolerance: al.tolerance, Associations: make([]Entry, 0, len(reported))}
	r.Summary = al.compare(reported, computed, func(e Entry) { r.Associations = append(r.Associations, e) }, false)
	return r
}

// compare matches the sides as Compare says, giving each entry to emit
// (nil: none), or only those not ok when flagged.
func (al allowance) compare(reported, computed []Side, emit func(Entry), flagged bool) Summary {
	sum := newSummary()
	mx := sum.maxima()
	m := newMatcher(reported, computed)
	for i := range reported {
		rep := &reported[i]
		status := StatusOnlyReported
		var d, allowed, bound Values
		ci := m.match(i, rep.Key)
		if ci >= 0 {
			status = mx.pair(&al, rep, &computed[ci], &d, &allowed, &bound)
		}
		sum.Counts[status]++
		if emit == nil || flagged && status == StatusOK {
			continue
		}
		e := Entry{Account: rep.Key.Account, User: rep.Key.User, Partition: rep.Key.Partition, Parent: rep.Parent, Depth: rep.Depth, Status: status,
			Reported: ref(rep.Values)}
		if ci >= 0 {
			e.Computed, e.Drift, e.Allowed, e.Bound = ref(computed[ci].Values), ref(d), ref(allowed), ref(bound)
			if p := computed[ci].Parts; p != nil {
				parts := *p
				parts.Truncation = float64(rep.Bound.RawUsage)
				e.BoundParts = &parts
			}
		}
		emit(e)
	}
	for i := range computed {
		if m.used[i] {
			continue
		}
		sum.Counts[StatusOnlyComputed]++
		if emit != nil {
			c := &computed[i]
			emit(Entry{Account: c.Key.Account, User: c.Key.User, Partition: c.Key.Partition, Parent: c.Parent, Depth: c.Depth, Status: StatusOnlyComputed, Computed: ref(c.Values)})
		}
	}
	return sum
}

// newSummary is an empty summary, with every status and value counted
// (0).
func newSummary() Summary {
	sum := Summary{Counts: make(map[Status]int, len(Statuses)), Beyond: make(map[string]int, len(Fields))}
	for _, s := range Statuses {
		sum.Counts[s] = 0
	}
	for _, f := range Fields {
		sum.Beyond[f] = 0
	}
	return sum
}

// maxima are a summary's largest drifts and bounds, value by value, and
// its counts of drift beyond what is allowed.
type maxima struct {
	drift, rel, bound, relBound [6]*Num
	beyond                      map[string]int
}

func (s *Summary) maxima() maxima {
	return maxima{s.MaxDrift.fields(), s.MaxRelative.fields(), s.MaxBound.fields(), s.MaxRelativeBound.fields(), s.Beyond}
}

// pair compares the values of rep and com, present on both sides, into
// their drift d, what al allows and the bound, keeps the maxima and says
// whether the association drifts.
func (mx *maxima) pair(al *allowance, rep, com *Side, d, allowed, bound *Values) Status {
	status := StatusOK
	cf, rf, df, af := com.Values.fields(), rep.Values.fields(), d.fields(), allowed.fields()
	cb, rb := com.Bound.fields(), rep.Bound.fields()
	mf, relf, exf := al.margin.fields(), al.relative.fields(), al.excess.fields()
	bf := bound.fields()
	for k := range cf {
		larger := math.Max(math.Abs(float64(*cf[k])), math.Abs(float64(*rf[k])))
		*bf[k] = *cb[k] + *rb[k]
		if bf[k] == &bound.FairShare {
			*bf[k] = factorBound(*bf[k])
		}
		*af[k] = Num(al.tolerance) + *mf[k] + *bf[k]
		if rel := *relf[k]; rel > 0 {
			*af[k] += rel * Num(larger)
		}
		dk := diff(float64(*cf[k]), float64(*rf[k]))
		*df[k] = Num(dk)
		if math.IsNaN(dk) {
			continue
		}
		if math.Abs(dk) > math.Abs(float64(*mx.drift[k])) {
			*mx.drift[k] = Num(dk)
		}
		if r := math.Abs(dk) / math.Max(larger, 1); r > float64(*mx.rel[k]) && !math.IsInf(larger, 0) {
			*mx.rel[k] = Num(r)
		}
		if b := float64(*bf[k]); b > float64(*mx.bound[k]) {
			*mx.bound[k] = Num(b)
		}
		// relative drift cannot exceed 1: a bound of 1 allows anything
		if r := math.Min(float64(*bf[k])/math.Max(larger, 1), 1); r > float64(*mx.relBound[k]) && !math.IsInf(larger, 0) {
			*mx.relBound[k] = Num(r)
		}
		lim := float64(*af[k])
		if dk < 0 {
			lim += float64(*exf[k])
		}
		if math.Abs(dk) > lim {
			status = StatusDrift
			mx.beyond[Fields[k]]++
		}
	}
	return status
}

// factorBound caps a bound on the difference of two fairshare factors,
// which lie in [0, 1], at 1: no difference of two is larger, so a bound
// beyond it explains nothing more, and the sides' bounds, added, can pass
// it (each side's rank range among tied Fair Tree siblings, when their
// order is unknown, may span nearly all users). +Inf, not judged, stays.
func factorBound(b Num) Num {
	if math.IsInf(float64(b), 1) {
		return b
	}
	return min(max(b, 0), 1)
}

// matcher finds each reported side's computed side, once each. Without
// sshare -m, one user's associations in several partitions share a key
// and the partition is unknown: they are matched in order, which is right
// for a report and its replay, the same rows; against the database
// CompareReport refuses such a report first (oneEach).
type matcher struct {
	computed []Side
	byKey    *chain // nil: the sides are aligned
	byUser   *chain // made only when a key does not match
	used     []bool
}

// newMatcher indexes computed by key, unless the sides are aligned (the
// same keys in the same order, as a report and its replay are): matched
// in order, each reported side then meets its own index first, and a
// report's 100k keys need no hashing.
func newMatcher(reported, computed []Side) matcher {
	m := matcher{computed: computed, used: make([]bool, len(computed))}
	if !aligned(reported, computed) {
		m.byKey = chains(computed, func(s *Side) result.AssocKey { return s.Key })
	}
	return m
}

// aligned: a and b have the same keys in the same order.
func aligned(a, b []Side) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key {
			return false
		}
	}
	return true
}

// match is the computed side of reported side i, of key k, not yet
// matched (-1: none), now matched.
func (m *matcher) match(i int, k result.AssocKey) int {
	if m.byKey == nil {
		m.used[i] = true
		return i
	}
	ci := m.byKey.first(k, m.used)
	if ci < 0 && k.Partition == "" {
		if m.byUser == nil {
			m.byUser = chains(m.computed, func(s *Side) result.AssocKey { return result.AssocKey{Account: s.Key.Account, User: s.Key.User} })
		}
		ci = m.byUser.first(k, m.used)
	}
	if ci >= 0 {
		m.used[ci] = true
	}
	return ci
}

// ref is a copy of v on the heap: an entry's values, made only when there
// is an entry (the locals they are copied from stay on the stack).
func ref(v Values) *Values { return &v }

// chain indexes sides by a key, each key's sides in order, without a
// slice per key (200k small slices at 100k associations).
type chain struct {
	head map[result.AssocKey]int32 // first side + 1
	next []int32                   // next side with the same key + 1; 0: none
}

func chains(sides []Side, key func(*Side) result.AssocKey) *chain {
	c := &chain{head: make(map[result.AssocKey]int32, len(sides)), next: make([]int32, len(sides))}
	for i := len(sides) - 1; i >= 0; i-- {
		k := key(&sides[i])
		c.next[i] = c.head[k]
		c.head[k] = int32(i + 1)
	}
	return c
}

// first is the first side with key k not yet used (-1: none).
func (c *chain) first(k result.AssocKey, used []bool) int {
	for i := c.head[k]; i != 0; i = c.next[i-1] {
		if !used[i-1] {
			return int(i - 1)
		}
	}
	return -1
}

func diff(c, r float64) float64 {
	if math.IsInf(c, 0) && c == r {
		return 0
	}
	return c - r
}

// OK reports whether every compared value is within what is allowed and
// both sides have the same associations.
func (r *Report) OK() bool {
	for _, b := range r.Billing {
		if b.Mismatched > 0 {
			return false
		}
	}
	return r.Summary.Counts[StatusDrift] == 0 && r.Summary.Counts[StatusOnlyReported] == 0 && r.Summary.Counts[StatusOnlyComputed] == 0 &&
		(r.Formula == nil || r.Formula.OK())
}
