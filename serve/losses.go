package serve

import (
	"slices"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// lastLosses is how many of the last losses serve keeps and exports one
// series each of (slurmdbd_fairshare_usage_loss_timestamp_seconds).
const lastLosses = 20

// addLosses counts ls into l and keeps the last lastLosses of them, the
// latest one of each association and kind (one series each).
func addLosses(l *result.Losses, ls []result.UsageLoss) {
	for _, x := range ls {
		l.Counts[x.Kind]++
		l.Last = slices.DeleteFunc(l.Last, func(y result.UsageLoss) bool { return y.AssocKey == x.AssocKey && y.Kind == x.Kind })
		l.Last = append(l.Last, x)
	}
	if n := len(l.Last); n > lastLosses {
		l.Last = slices.Clone(l.Last[n-lastLosses:])
	}
}
