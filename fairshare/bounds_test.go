package fairshare

import (
	"math"
	"math/rand/v2"
	"testing"
)

// perturbed is t with each user's own usage moved by up to frac of it
// plus one (a uniform draw), accounts holding their subtree's sum again;
// extra is each association's largest move, summed like usage.
func perturbed(t *Tree, frac float64, r *rand.Rand) (moved *Tree, extra []float64) {
	n := t.Len()
	assocs := make([]Association, n)
	extra = make([]float64, n)
	for i := range n {
		a := t.Association(i)
		if a.IsUser() {
			e := frac*a.RawUsage + 1
			extra[i] = e
			if r != nil {
				a.RawUsage = math.Max(0, a.RawUsage+(2*r.Float64()-1)*e)
			}
		} else {
			a.RawUsage = 0
		}
		assocs[i] = a
	}
	for i := n - 1; i > 0; i-- {
		p := assocs[i].Parent
		assocs[p].RawUsage += assocs[i].RawUsage
		extra[p] += extra[i]
	}
	moved, err := NewTree(assocs)
	if err != nil {
		panic(err)
	}
	return moved, extra
}

// TestRankIntervalsHoldPerturbedRanks checks RankIntervals against an
// independent derivation: Fair Tree computed again on usage moved within
// the stated errors. Every rank any draw gives must lie in the interval;
// with no error the interval is the tie range alone.
func TestRankIntervalsHoldPerturbedRanks(t *testing.T) {
	tree := Synthetic(400, 4, 7)
	base, extra := perturbed(tree, 0.03, nil)
	vals := base.FairTree()
	b := base.UsageBounds(AlgorithmFairTree, vals, 0, extra, 1)
	lfsErr := make([]float64, len(b))
	for i := range b {
		lfsErr[i] = b[i].LevelFS
	}
	lo, hi := base.RankIntervals(vals, lfsErr)
	r := rand.New(rand.NewPCG(1, 2))
	widened, moves := 0, 0
	for i := range base.Len() {
		if a := base.Association(i); a.IsUser() && (lo[i] < vals[i].RankMin || hi[i] > vals[i].RankMax) {
			widened++
		}
	}
	for range 300 {
		m, _ := perturbed(tree, 0.03, r)
		got := m.FairTree()
		for i := range got {
			if a := base.Association(i); !a.IsUser() {
				continue
			}
			if got[i].Rank != vals[i].Rank {
				moves++
			}
			if got[i].Rank < lo[i] || got[i].Rank > hi[i] {
				t.Fatalf("%s: rank %d on perturbed usage, interval %d-%d (rank %d unperturbed)", base.assocs[i].name(), got[i].Rank, lo[i], hi[i], vals[i].Rank)
			}
		}
	}
	// the test means something only if ranks did move and intervals widened
	if moves == 0 || widened == 0 {
		t.Fatalf("no rank moved (%d) or no interval widened (%d): the perturbation is too small to test anything", moves, widened)
	}
	t.Logf("%d rank moves over 300 draws, all inside; %d of %d users' intervals widened", moves, widened, base.Users())

	zero := make([]float64, len(b))
	lo, hi = base.RankIntervals(vals, zero)
	for i := range vals {
		if a := base.Association(i); a.IsUser() && (lo[i] != vals[i].RankMin || hi[i] != vals[i].RankMax) {
			t.Fatalf("%s: no usage error, interval %d-%d: expected the tie range %d-%d", base.assocs[i].name(), lo[i], hi[i], vals[i].RankMin, vals[i].RankMax)
		}
	}
}

// TestUsageBoundsHoldPerturbedClassic: the classic factor on usage moved
// within the stated per-association errors stays within UsageBounds (to
// first order: the errors here are small).
func TestUsageBoundsHoldPerturbedClassic(t *testing.T) {
	tree := Synthetic(400, 4, 11)
	base, extra := perturbed(tree, 0.01, nil)
	vals := base.Classic(ClassicOptions{Dampening: 1})
	b := base.UsageBounds(AlgorithmClassic, vals, 0, extra, 1)
	r := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for range 200 {
		m, _ := perturbed(tree, 0.01, r)
		got := m.Classic(ClassicOptions{Dampening: 1})
		for i := range got {
			d := math.Abs(got[i].FairShare - vals[i].FairShare)
			if d > b[i].FairShare*1.05+1e-12 {
				t.Fatalf("%s: factor moved %g on perturbed usage, bound %g", base.assocs[i].name(), d, b[i].FairShare)
			}
			if b[i].FairShare > 0 && d > 1e-9 {
				worst = math.Max(worst, d/b[i].FairShare)
			}
		}
	}
	if worst < 0.1 {
		t.Fatalf("largest move only %.3f of its bound: the bound is far too loose to be a bound worth testing", worst)
	}
	t.Logf("largest factor move: %.2f of its bound", worst)
}
