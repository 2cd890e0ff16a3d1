package passes

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Between reports whether slurmctld ran a decay pass between two
// reports. Without AccountingStorageEnforce=limits (chargeAtEnd false)
// RawUsage moves only at passes (an admin's reset aside, a fault drift
// shows anyway), so any change shows one: on a young cluster, whose
// usage all comes from running jobs, it only rises, and decay alone went
// unseen (a live test: 10k associations, three jobs, never
// pinned). Under limits a job's end is charged at once and only raises
// its chain's RawUsage, so two things show a pass there: decay, the only
// thing that lowers an association's RawUsage, and the values slurmctld
// computes at a pass, an account's NormUsage and EffectvUsage, changing.
// A pass that changes nothing of these (no usage yet, or every ratio
// kept) goes unseen, which leaves the phase less known, never wrong.
func Between(prev, cur *shares.Table, chargeAtEnd bool) bool {
	type seen struct {
		raw, norm, efctv float64
		twice            bool // one user in two partitions without sshare -m
	}
	old := make(map[result.AssocKey]seen, len(prev.Rows))
	for _, r := range prev.Rows {
		k := result.KeyOf(r.Account, r.User, r.Partition)
		_, twice := old[k]
		old[k] = seen{r.RawUsage, r.NormUsage, r.EffectvUsage, twice}
	}
	moved := func(a, b float64) bool { return a != b && !(math.IsNaN(a) && math.IsNaN(b)) }
	for _, r := range cur.Rows {
		p, ok := old[result.KeyOf(r.Account, r.User, r.Partition)]
		if !ok || p.twice {
			continue
		}
		if r.RawUsage < p.raw || !chargeAtEnd && r.RawUsage != p.raw || r.User == "" && (moved(r.NormUsage, p.norm) || moved(r.EffectvUsage, p.efctv)) {
			return true
		}
	}
	return false
}
