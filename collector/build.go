package collector

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// BuildAssocs turns a computed tree into the published associations: both
// algorithms' values, decayed usage per TRES name (may be nil) and, from a
// comparison with what Slurm reports (may be nil), the reported factor and
// usage.
func BuildAssocs(t *fairshare.Tree, classic, fairTree []fairshare.Values, tres map[string][]float64, rep *drift.Report) []Association {
	n := t.Len()
	out := make([]Association, n)
	reported := map[drift.Key][]*drift.Entry{}
	if rep != nil {
		for i := range rep.Associations {
			e := &rep.Associations[i]
			if e.Reported != nil {
				k := drift.Key{Account: e.Account, User: e.User, Partition: e.Partition}
				reported[k] = append(reported[k], e)
			}
		}
	}
	for i := 0; i < n; i++ {
		a := t.Association(i)
		o := &out[i]
		o.Account, o.User, o.Partition, o.Shares, o.RawUsage = a.Account, a.User, a.Partition, a.Shares, a.RawUsage
		if a.Parent >= 0 {
			o.Parent = t.Association(a.Parent).Account
		}
		o.Classic, o.FairTree = classic[i], fairTree[i]
		o.TicketBased, o.Maui = math.NaN(), math.NaN()
		o.ReportedFactor, o.ReportedUsage = math.NaN(), math.NaN()
		if len(tres) > 0 {
			o.TRESUsage = make(map[string]float64, len(tres))
			for name, v := range tres {
				o.TRESUsage[name] = v[i]
			}
		}
		k := drift.Key{Account: a.Account, User: a.User, Partition: a.Partition}
		if es := reported[k]; len(es) > 0 {
			o.ReportedFactor, o.ReportedUsage = float64(es[0].Reported.FairShare), float64(es[0].Reported.RawUsage)
			reported[k] = es[1:]
		}
	}
	return out
}
