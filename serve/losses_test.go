package serve

import (
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestAddLosses: the last losses keep one series per association and
// kind, every loss counted.
func TestAddLosses(t *testing.T) {
	l := result.Losses{Counts: map[string]int{}}
	loss := result.UsageLoss{AssocKey: result.AssocKey{Account: "phys", User: "bob"}, Kind: result.LossBetweenPasses}
	addLosses(&l, []result.UsageLoss{loss})
	addLosses(&l, []result.UsageLoss{loss})
	if l.Counts[result.LossBetweenPasses] != 2 || len(l.Last) != 1 {
		t.Errorf("counts %v, last %v: want 2 counted, one kept", l.Counts, l.Last)
	}
}
