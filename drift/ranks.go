package drift

import (
	"fmt"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

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
// gives against the one Slurm's usage gives, not judged while slurmctld
// settles. rt's nodes are the report's rows, in order.
func (c *Comparison) usagePairs(t *fairshare.Tree, own []fairshare.Values, rt *fairshare.Tree, replay []fairshare.Values, fairTree, settling bool) (shares, rank result.Drift) {
	shares = result.Drift{Kind: result.DriftUsage, Value: "shares"}
	rank = result.Drift{Kind: result.DriftUsage, Value: "rank"}
	if settling {
		rank.Bound = math.Inf(1) // measured, not judged (compareUsage)
	}
	for i := range t.Len() {
		a := t.Association(i)
		k := result.KeyOf(a.Account, a.User, a.Partition)
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
			if off > 0 && !settling {
				rank.Beyond++
				flag(c.Usage, k, fmt.Sprintf("rank %s from the database's usage, %s from Slurm's", rankRange(own[i]), rankRange(replay[j])))
			}
		}
	}
	return shares, rank
}
