package collector

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

var digestSeed = maphash.MakeSeed()

// assocDigest hashes what the association series of s are rendered from:
// equal digests, equal series.
func assocDigest(s *Snapshot, extended bool) uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var b [8]byte
	num := func(v float64) {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		h.Write(b[:])
	}
	str := func(v string) {
		num(float64(len(v)))
		h.WriteString(v)
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
			}
		}
	}
	return h.Sum64()
}
