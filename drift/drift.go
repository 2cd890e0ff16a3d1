// Package drift compares the fairshare values the exporter computes with the
// ones Slurm reports, association by association.
package drift

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// Status of one association in a comparison.
type Status string

const (
	StatusOK           Status = "ok"
	StatusDrift        Status = "drift"
	StatusOnlyReported Status = "only_reported"
	StatusOnlyComputed Status = "only_computed"
)

// Statuses in the order reports list them.
var Statuses = []Status{StatusOK, StatusDrift, StatusOnlyReported, StatusOnlyComputed}

// Key identifies an association across sources. Account names are unique
// in Slurm, so an account row is its name with no user.
type Key struct {
	Account, User, Partition string
}

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
	// tolerance plus what the reported inputs' precision explains.
	Allowed *Values `json:"allowed,omitempty"`
}

// Side is one source's view of an association.
type Side struct {
	Key    Key
	Parent string
	Depth  int
	Values Values
	// Bound is how uncertain each value is on this side (0 if exact).
	Bound Values
}

// Summary counts entries by status and records the largest drift per
// value, over associations present on both sides.
type Summary struct {
	Counts   map[Status]int `json:"counts"`
	MaxDrift Values         `json:"max_drift"`
	// Beyond counts, per value, the associations whose drift exceeds what
	// is allowed.
	Beyond map[string]int `json:"beyond"`
}

// Report is a whole comparison; its JSON is the check command's output.
type Report struct {
	Algorithm    fairshare.Algorithm `json:"algorithm"`
	Tolerance    float64             `json:"tolerance"`
	Note         string              `json:"note,omitempty"`
	Summary      Summary             `json:"summary"`
	Associations []Entry             `json:"associations"`
}

// Compare matches reported and computed associations by key. Entries follow
// the reported order, then computed-only associations in computed order. A
// value drifts when |computed - reported| exceeds tolerance plus both
// sides' bounds; a value blank on either side is not compared.
func Compare(alg fairshare.Algorithm, tolerance float64, reported, computed []Side) *Report {
	r := &Report{Algorithm: alg, Tolerance: tolerance, Associations: make([]Entry, 0, len(reported))}
	r.Summary.Counts = make(map[Status]int, len(Statuses))
	for _, s := range Statuses {
		r.Summary.Counts[s] = 0
	}
	r.Summary.Beyond = make(map[string]int, len(Fields))
	for _, f := range Fields {
		r.Summary.Beyond[f] = 0
	}
	maxDrift := r.Summary.MaxDrift.fields()
	// Without sshare -m, one user's associations in several partitions
	// share a key and the partition is unknown: they are matched in order.
	byKey := make(map[Key][]int, len(computed))
	byUser := make(map[Key][]int, len(computed))
	for i, c := range computed {
		byKey[c.Key] = append(byKey[c.Key], i)
		u := Key{Account: c.Key.Account, User: c.Key.User}
		byUser[u] = append(byUser[u], i)
	}
	used := make([]bool, len(computed))
	match := func(k Key) int {
		for _, ci := range byKey[k] {
			if !used[ci] {
				return ci
			}
		}
		if k.Partition == "" {
			for _, ci := range byUser[k] {
				if !used[ci] {
					return ci
				}
			}
		}
		return -1
	}
	for i := range reported {
		rep := &reported[i]
		e := Entry{Account: rep.Key.Account, User: rep.Key.User, Partition: rep.Key.Partition, Parent: rep.Parent, Depth: rep.Depth}
		rv := rep.Values
		e.Reported = &rv
		if ci := match(rep.Key); ci < 0 {
			e.Status = StatusOnlyReported
		} else {
			used[ci] = true
			com := &computed[ci]
			cv := com.Values
			e.Computed = &cv
			e.Drift, e.Allowed = new(Values), new(Values)
			e.Status = StatusOK
			cf, rf, df, af := cv.fields(), rv.fields(), e.Drift.fields(), e.Allowed.fields()
			cb, rb := com.Bound.fields(), rep.Bound.fields()
			for k := range cf {
				*af[k] = Num(tolerance) + *cb[k] + *rb[k]
				d := diff(float64(*cf[k]), float64(*rf[k]))
				*df[k] = Num(d)
				if math.IsNaN(d) {
					continue
				}
				if math.Abs(d) > math.Abs(float64(*maxDrift[k])) {
					*maxDrift[k] = Num(d)
				}
				if math.Abs(d) > float64(*af[k]) {
					e.Status = StatusDrift
					r.Summary.Beyond[Fields[k]]++
				}
			}
		}
		r.Summary.Counts[e.Status]++
		r.Associations = append(r.Associations, e)
	}
	for i := range computed {
		if used[i] {
			continue
		}
		c := &computed[i]
		cv := c.Values
		r.Associations = append(r.Associations, Entry{Account: c.Key.Account, User: c.Key.User, Partition: c.Key.Partition,
			Parent: c.Parent, Depth: c.Depth, Status: StatusOnlyComputed, Computed: &cv})
		r.Summary.Counts[StatusOnlyComputed]++
	}
	return r
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
	return r.Summary.Counts[StatusDrift] == 0 && r.Summary.Counts[StatusOnlyReported] == 0 && r.Summary.Counts[StatusOnlyComputed] == 0
}
