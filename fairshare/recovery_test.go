package fairshare

import (
	"math"
	"testing"
)

// TestRecoveryAgainstQuiet: each user's crossing of its fair level from
// Recovery's shared scenario against the exact forecast of its own
// default assumption, Quiet(i).Crossings, one whole-tree forecast per
// user. Classic must agree to the pass; Fair Tree differs only where an
// exact tie of LevelFS orders siblings otherwise (rankView.values), which
// random usage leaves to users without usage, tied at +Inf with their idle
// siblings and idle accounts: those are counted, not failed.
func TestRecoveryAgainstQuiet(t *testing.T) {
	const horizon, step = 10 * 86400, 3600
	for _, alg := range []Algorithm{AlgorithmClassic, AlgorithmFairTree} {
		total, off, idle, far := 0, 0, 0, 0.0
		for seed := uint64(1); seed <= 6; seed++ {
			f := scenario(t, seed, alg, seed%2 == 0)
			var users []int
			for i := range f.Tree.Len() {
				if f.Tree.isUser(int32(i)) {
					users = append(users, i)
				}
			}
			thr, err := f.Tree.FairLevels(users, alg, f.Dampening)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Recovery(users, thr, horizon, step)
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for k, i := range users {
				fair, err := f.Tree.FairLevel(i, alg, f.Dampening)
				if err != nil {
					t.Fatal(err)
				}
				q := f.Quiet(i)
				tied := alg == AlgorithmFairTree && q.Usage(f.At)[i] == 0
				if fair.FairShare != thr[k] && !tied {
					t.Errorf("%s seed %d: user %d: FairLevels %g, FairLevel %g", alg, seed, i, thr[k], fair.FairShare)
				}
				want, err := q.Crossings([]int{i}, []float64{thr[k]}, horizon, step)
				if err != nil {
					t.Fatal(err)
				}
				w, g := want[0], got[k]
				total++
				if w.Found {
					found++
				}
				if w.Found != g.Found || w.Rising != g.Rising || (w.Found && w.At != g.At) {
					if tied {
						idle++
						continue
					}
					off++
					d := math.Abs(w.At - g.At)
					if w.Found != g.Found {
						d = horizon
					}
					far = math.Max(far, d)
					t.Errorf("%s seed %d: user %d (usage %g): Quiet crosses %v at +%.0f s (rising %v), Recovery %v at +%.0f s (rising %v)",
						alg, seed, i, q.Usage(f.At)[i], w.Found, w.At-f.At, w.Rising, g.Found, g.At-f.At, g.Rising)
				}
				if w.Found && math.Abs(w.Values.FairShare-g.Values.FairShare) > 1e-9 {
					t.Errorf("%s seed %d: user %d: factor at the crossing %g, Quiet %g", alg, seed, i, g.Values.FairShare, w.Values.FairShare)
				}
			}
			if found == 0 {
				t.Fatalf("%s seed %d: no user crosses: the scenario tests nothing", alg, seed)
			}
		}
		t.Logf("%s: %d users, %d crossings differ from the exact per-user forecast (largest difference %.0f s), %d more of idle users tied at +Inf", alg, total, off, far, idle)
	}
}
