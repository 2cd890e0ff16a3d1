package collector

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

var digestSeed = maphash.MakeSeed()

// assocDigest hashes what the association series of s are rendered from:
// equal digests, equal series.
func assocDigest(s *result.Snapshot, extended bool) uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	// values are gathered and hashed 4 KB at a time: a Write per value
	// would be most of the digest's time
	b := make([]byte, 0, 4096+256)
	flush := func() {
		if len(b) >= 4096 {
			h.Write(b)
			b = b[:0]
		}
	}
	num := func(v float64) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	str := func(v string) {
		num(float64(len(v)))
		b = append(b, v...)
		flush()
	}
	if extended {
		num(1)
	}
	for i := range s.Clusters {
		cl := &s.Clusters[i]
		str(cl.Name)
		str(string(cl.Algorithm))
		num(float64(len(cl.Assocs)))
		num(float64(len(cl.TRESNames)))
		for _, n := range cl.TRESNames {
			str(n)
		}
		for j := range cl.Assocs {
			a := &cl.Assocs[j]
			str(a.Account)
			str(a.User)
			str(a.Partition)
			str(a.Parent)
			num(float64(a.Shares))
			for _, v := range []float64{a.RawUsage, a.TicketBased, a.Maui, a.ReportedFactor, a.ReportedUsage, a.Uncharged} {
				num(v)
			}
			for _, v := range [2]*fairshare.Values{&a.Classic, &a.FairTree} {
				num(v.NormShares)
				num(v.NormUsage)
				num(v.EffectiveUsage)
				num(v.FairShare)
				num(v.LevelFS)
				num(float64(v.Rank))
			}
			num(float64(len(a.TRES)))
			for _, v := range a.TRES {
				num(v)
				flush()
			}
			flush()
		}
	}
	h.Write(b)
	return h.Sum64()
}

// sameAssocs reports whether b's association series are a's without
// hashing them: the same association slices (a published snapshot does
// not change, and the exporter publishes an unchanged tree's associations
// again), cluster names, algorithms and TRES names. Hashing them would be
// most of the publish stage of a steady refresh, whose tree seldom changes.
func sameAssocs(a, b *result.Snapshot) bool {
	if a == nil || len(a.Clusters) != len(b.Clusters) {
		return false
	}
	for i := range a.Clusters {
		x, y := &a.Clusters[i], &b.Clusters[i]
		if x.Name != y.Name || x.Algorithm != y.Algorithm || !slices.Equal(x.TRESNames, y.TRESNames) ||
			len(x.Assocs) != len(y.Assocs) || len(x.Assocs) > 0 && &x.Assocs[0] != &y.Assocs[0] {
			return false
		}
	}
	return true
}
