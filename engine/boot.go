package engine

import (
	"context"
	"math"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

type bootKey struct {
	boot   time.Time
	passes fairshare.Passes
	since  time.Time
}

// tailHalfLives: the tails of jobs that ended more than this many
// half-lives before the moment weigh below 1e-6 of their usage.
const tailHalfLives = 20

// setBoot sets in's BootUsage and, where the phase is known and tails are
// left uncharged (no AccountingStorageEnforce=limits), BootTails.
func (e *Engine) setBoot(ctx context.Context, c ClusterSource, in *build.Inputs, since time.Time, ids []uint32) error {
	tails, boot, err := e.bootSums(ctx, in.Name, c, in.Passes, since, in.Computed, ids)
	if err != nil {
		return err
	}
	if in.Phase.Source != result.PhaseUnknown && !in.Passes.ChargeJobEnd {
		in.BootTails = tails
	}
	in.BootUsage = boot
	return nil
}

// bootSums is, per association of ids, the tail sums (usage.TailRisk's
// Rate and Most) of the jobs that ended before slurmctld's boot and the
// usage charged before it, decayed to at: the rebuild at the boot's sums,
// kept per boot and settings (one cold load per boot), times d^(at-boot),
// which is exact for what ended by then.
func (e *Engine) bootSums(ctx context.Context, name string, c ClusterSource, passes fairshare.Passes, since, at time.Time, ids []uint32) (*usage.TailRisk, []float64, error) {
	out, raw := &usage.TailRisk{Rate: make([]float64, len(ids)), Most: make([]float64, len(ids))}, make([]float64, len(ids))
	age := at.Sub(e.boot).Seconds()
	if hl := passes.HalfLife; hl > 0 && age > tailHalfLives*hl {
		return out, raw, nil
	}
	cs := e.clusters[name]
	key := bootKey{e.boot, passes, since}
	key.passes.Phase = 0 // the tails' Rate and Most do not depend on it; the last pass moves every period
	if cs.bootSums == nil || cs.bootKey != key {
		snap, err := c.SnapshotAsCtld(ctx, e.boot, e.boot, passes, since, time.Local)
		if err != nil {
			return nil, nil, err
		}
		cs.bootSums, cs.bootKey = map[uint32][3]float64{}, key
		t := snap.TailRisk
		for i, r := range snap.Tree.Row {
			v := [3]float64{2: snap.Tree.Assocs[i].RawUsage}
			if t.Rate != nil {
				v[0], v[1] = t.Rate[i], t.Most[i]
			}
			cs.bootSums[snap.Rows[r].ID] = v
		}
	}
	k := math.Pow(passes.D(), max(0, age))
	for i, id := range ids {
		v := cs.bootSums[id]
		out.Rate[i], out.Most[i], raw[i] = v[0]*k, v[1]*k, v[2]*k
	}
	return out, raw, nil
}
