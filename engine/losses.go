package engine

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// UsageLosses are the user associations whose RawUsage fell from read
// prev to read cur by more than decay and sshare's truncation explain,
// seen without the database. slurmctld lowers an association's usage
// only by decaying it at its passes; between prev's start and cur's end
// the passes decay it at most by d^(span+period) (the pass before prev
// may be a period before it), and each read truncates to an integer. A
// larger fall is usage lost: sacctmgr's RawUsage=0, or, across a restart,
// state restored from a checkpoint older than the last read or lost. Only
// users are counted: an account falls with its users. With resets
// (PriorityUsageResetPeriod), one that zeroes root too between two reads
// of one boot is the reset, not a loss.
func UsageLosses(prev, cur *Reading, d float64, period time.Duration, resets bool) []result.UsageLoss {
	if prev == nil || cur == nil || prev.Raw == nil || cur.Raw == nil {
		return nil
	}
	span := cur.End.Sub(prev.Start) + period
	f := math.Pow(d, max(0, span.Seconds()))
	floor := func(before float64) float64 { return before*f - shares.UsageResolution }
	var root result.AssocKey
	for _, r := range cur.Out.Rows {
		if r.Depth == 0 {
			root = result.KeyOf(r.Account, r.User, r.Partition)
			break
		}
	}
	kind := result.LossBetweenPasses
	if !prev.Boot.IsZero() && !cur.Boot.IsZero() && !prev.Boot.Equal(cur.Boot) {
		kind = result.LossAcrossRestart
	}
	if was, ok := prev.Raw[root]; ok && resets && kind == result.LossBetweenPasses && cur.Raw[root] < 0.01*floor(was) {
		return nil // a usage reset: every association zeroed at once
	}
	var out []result.UsageLoss
	for k, now := range cur.Raw {
		was, ok := prev.Raw[k]
		if !ok || k.User == "" || now >= floor(was) {
			continue
		}
		out = append(out, result.UsageLoss{AssocKey: k,
			Kind: kind, At: cur.At, Before: was * f, After: now})
	}
	slices.SortFunc(out, func(a, b result.UsageLoss) int { return compareKeys(a.AssocKey, b.AssocKey) })
	return out
}

func compareKeys(a, b result.AssocKey) int {
	return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.User, b.User), strings.Compare(a.Partition, b.Partition))
}
