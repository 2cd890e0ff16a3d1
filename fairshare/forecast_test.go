package fairshare

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// scenario is a random forecast over a Synthetic tree: rates for about a
// third of the users and running jobs for some, sized so that the
// equilibrium of the new usage is of the order of the current usage.
func scenario(t *testing.T, seed uint64, alg Algorithm, chargeEnd bool) Forecast {
	t.Helper()
	tr := Synthetic(80, 3, seed)
	r := rand.New(rand.NewPCG(seed, 99))
	p := Passes{HalfLife: 86400, Period: 300, Phase: 1_700_000_123, ChargeJobEnd: chargeEnd}
	at := 1_800_000_000.0 + float64(r.IntN(300))
	root := tr.Association(tr.Root()).RawUsage
	active := 0
	for i := range tr.Len() {
		if tr.isUser(int32(i)) {
			active++
		}
	}
	// r·HalfLife/0.693 is a rate's equilibrium usage
	scale := 3 * root * 0.693 / p.HalfLife / float64(active)
	f := Forecast{Tree: tr, Algorithm: alg, Dampening: 1 + float64(r.IntN(2)), Passes: p, At: at, Rate: make([]float64, tr.Len())}
	for i := range tr.Len() {
		if !tr.isUser(int32(i)) {
			continue
		}
		if r.IntN(3) == 0 {
			f.Rate[i] = scale * r.Float64()
		}
		if r.IntN(4) == 0 {
			end := at + r.Float64()*2*86400
			if r.IntN(5) == 0 {
				end = math.Inf(1)
			}
			f.Jobs = append(f.Jobs, RunningJob{Assoc: i, Billing: scale * 3 * r.Float64(), Start: at - r.Float64()*3600, End: end})
		}
	}
	return f
}

// brute steps the usage minute by minute as slurmctld's passes do under
// the default assumption for association quiet, with nothing of
// Forecast's code: at each pass every usage is decayed by d^Δ since the
// pass before; each running job of quiet is charged Δ·d^Δ·billing for the
// Δ since its last charge (under limits its last partial interval when it
// ends); every other association is charged d^Δ times the integral over
// the interval of the larger of its rate and its running jobs' billing.
// It returns the values at every step (recomputed by NewTree and Compute
// where usage changed).
type bruteStep struct {
	at   float64
	vals []Values
	raw  []float64
}

func brute(t *testing.T, f Forecast, horizon float64, quiet int) []bruteStep {
	t.Helper()
	tr, p := f.Tree, f.Passes
	n := tr.Len()
	d := 1 - 0.693/p.HalfLife
	isQuiet := func(i int) bool {
		for ; i >= 0; i = tr.Association(i).Parent {
			if i == quiet {
				return true
			}
		}
		return false
	}
	// others' usage over [a, b): max(rate, running billing) integrated
	// piece by piece between the jobs' edges
	others := func(i int, a, b float64, from []float64) float64 {
		cuts := []float64{a, b}
		for k, j := range f.Jobs {
			for _, x := range []float64{from[k], j.End} {
				if j.Assoc == i && x > a && x < b {
					cuts = append(cuts, x)
				}
			}
		}
		sort.Float64s(cuts)
		sum := 0.0
		for c := 0; c+1 < len(cuts); c++ {
			mid, run := (cuts[c]+cuts[c+1])/2, 0.0
			for k, j := range f.Jobs {
				if j.Assoc == i && from[k] <= mid && mid < j.End {
					run += j.Billing
				}
			}
			sum += math.Max(f.Rate[i], run) * (cuts[c+1] - cuts[c])
		}
		return sum
	}
	own := make([]float64, n) // new usage per association, before subtree sums
	cur := make([]float64, n) // current usage, decayed
	for i := range n {
		cur[i] = tr.Association(i).RawUsage
	}
	lastPass := p.Phase + math.Floor((f.At-p.Phase)/p.Period)*p.Period
	charged := make([]float64, len(f.Jobs))
	for k, j := range f.Jobs {
		charged[k] = math.Max(j.Start, lastPass)
	}
	from := append([]float64(nil), charged...)
	compute := func() []Values {
		assocs := make([]Association, n)
		sum := append([]float64(nil), own...)
		for i := n - 1; i >= 0; i-- {
			if pa := tr.Association(i).Parent; pa >= 0 {
				sum[pa] += sum[i]
			}
		}
		for i := range n {
			assocs[i] = tr.Association(i)
			assocs[i].RawUsage = cur[i] + sum[i]
		}
		nt, err := NewTree(assocs)
		if err != nil {
			t.Fatal(err)
		}
		v, err := nt.Compute(f.Algorithm, f.Dampening)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	vals := compute()
	raw := func() []float64 {
		out := make([]float64, n)
		for i := range n {
			out[i] = vals[i].RawUsage
		}
		return out
	}
	out := []bruteStep{{f.At, vals, raw()}}
	for now := f.At + 60; now <= f.At+horizon; now += 60 {
		changed := false
		for q := lastPass + p.Period; q <= now; q += p.Period {
			// job ends between passes, charged at once under limits
			for k, j := range f.Jobs {
				if isQuiet(j.Assoc) && p.ChargeJobEnd && j.End > charged[k] && j.End < q {
					dt := j.End - charged[k]
					own[j.Assoc] += dt * math.Pow(d, dt) * j.Billing
					charged[k] = math.Inf(1)
				}
			}
			dt := q - lastPass
			for i := range n {
				cur[i] *= math.Pow(d, dt)
				own[i] *= math.Pow(d, dt)
				if !isQuiet(i) {
					own[i] += others(i, lastPass, q, from) * math.Pow(d, dt)
				}
			}
			for k, j := range f.Jobs {
				if isQuiet(j.Assoc) && charged[k] < q && j.End >= q {
					dt := q - charged[k]
					own[j.Assoc] += dt * math.Pow(d, dt) * j.Billing
					charged[k] = q
				}
			}
			lastPass, changed = q, true
		}
		if changed {
			vals = compute()
		}
		out = append(out, bruteStep{now, vals, raw()})
	}
	return out
}

// TestForecastAgainstBruteForce: usage and factors at chosen instants, and
// the first crossing of a threshold, under the default assumption for a
// user with a running job, against the minute-by-minute simulation, on
// random trees under both algorithms.
func TestForecastAgainstBruteForce(t *testing.T) {
	const horizon = 3 * 86400
	for _, alg := range []Algorithm{AlgorithmClassic, AlgorithmFairTree} {
		for seed := uint64(1); seed <= 4; seed++ {
			all := scenario(t, seed, alg, seed%2 == 0)
			u := all.Jobs[0].Assoc
			f := all.Quiet(u)
			steps := brute(t, all, horizon, u)
			// usage at a few instants, within BucketUsage's edge error
			for _, s := range []int{0, 7, 61, 600, 1441, len(steps) - 1} {
				got := f.Usage(steps[s].at)
				for i, want := range steps[s].raw {
					if math.Abs(got[i]-want) > 1e-3*want+1e-6 {
						t.Fatalf("%s seed %d: usage of %d at +%.0f s: forecast %g, brute force %g", alg, seed, i, steps[s].at-f.At, got[i], want)
					}
				}
			}
			// crossings of the midpoint between now and the horizon, for
			// every user whose factor moves
			last := steps[len(steps)-1].vals
			var assocs []int
			var thr []float64
			for i := range f.Tree.Len() {
				if !f.Tree.isUser(int32(i)) || math.Abs(last[i].FairShare-steps[0].vals[i].FairShare) < 0.02 {
					continue
				}
				assocs = append(assocs, i)
				thr = append(thr, (last[i].FairShare+steps[0].vals[i].FairShare)/2)
			}
			if len(assocs) == 0 {
				t.Fatalf("%s seed %d: no factor moves: the scenario tests nothing", alg, seed)
			}
			got, err := f.Crossings(assocs, thr, horizon, 3600)
			if err != nil {
				t.Fatal(err)
			}
			for k, i := range assocs {
				want, found := firstCrossing(steps, i, thr[k])
				if !found {
					t.Fatalf("%s seed %d: user %d: brute force finds no crossing of %g", alg, seed, i, thr[k])
				}
				if !got[k].Found || math.Abs(got[k].At-want) > 60 {
					t.Errorf("%s seed %d: user %d crosses %g at +%.0f s (brute force), forecast +%.0f s (found %v)", alg, seed, i, thr[k], want-f.At, got[k].At-f.At, got[k].Found)
				}
			}
			t.Logf("%s seed %d: %d crossings agree", alg, seed, len(assocs))
		}
	}
}

// firstCrossing is the first step at which association i's factor is on
// the other side of thr than at the first step.
func firstCrossing(steps []bruteStep, i int, thr float64) (float64, bool) {
	up := steps[0].vals[i].FairShare < thr
	for _, s := range steps[1:] {
		if (s.vals[i].FairShare >= thr) == up {
			return s.at, true
		}
	}
	return 0, false
}

// TestForecastQuiet: with no rollups in the window (every rate 0) the
// others' running jobs still charge: the quiet user's factor moves (it
// would not without them: decay alone changes no factor), as the brute
// force of that assumption has it, and Quiet leaves the forecast it was
// given alone.
func TestForecastQuiet(t *testing.T) {
	f := scenario(t, 11, AlgorithmClassic, false)
	clear(f.Rate)
	now, err := f.Tree.Compute(f.Algorithm, f.Dampening)
	if err != nil {
		t.Fatal(err)
	}
	u := -1
	for i := range f.Tree.Len() {
		idle := !slices.ContainsFunc(f.Jobs, func(j RunningJob) bool { return j.Assoc == i })
		if f.Tree.isUser(int32(i)) && idle && now[i].FairShare < 0.9 && (u < 0 || now[i].FairShare > now[u].FairShare) {
			u = i
		}
	}
	if u < 0 || now[u].FairShare == 0 {
		t.Fatal("scenario has no idle user with a factor above 0 and below 0.9")
	}
	jobs := slices.Clone(f.Jobs)
	q := f.Quiet(u)
	steps := brute(t, f, 86400, u)
	last := steps[len(steps)-1]
	got := q.Usage(last.at)
	for i, want := range last.raw {
		if math.Abs(got[i]-want) > 1e-3*want+1e-6 {
			t.Fatalf("usage of %d: Quiet %g, brute force %g", i, got[i], want)
		}
	}
	vals, err := q.Values(last.at)
	if err != nil {
		t.Fatal(err)
	}
	if now := steps[0].vals[u].FairShare; !(math.Abs(vals[u].FairShare-now) > now*0.01) || math.Abs(vals[u].FairShare-last.vals[u].FairShare) > 1e-6 {
		t.Fatalf("user %d: factor %g now, %g after a day (brute force %g): expected it to move with the others' running jobs", u, now, vals[u].FairShare, last.vals[u].FairShare)
	}
	if len(q.Steps) == 0 || !slices.Equal(jobs, f.Jobs) || slices.ContainsFunc(f.Rate, func(r float64) bool { return r != 0 }) {
		t.Fatal("Quiet made no steps or changed the forecast it was given")
	}
}

// TestFairLevel: under Fair Tree the user's LevelFS is 1 at its fair
// level; under classic the fair level is 2^(-1/damp).
func TestFairLevel(t *testing.T) {
	tr := Synthetic(200, 3, 5)
	checked := 0
	for i := range tr.Len() {
		a := tr.Association(i)
		if !a.IsUser() || a.UsesParent() || a.Shares == 0 {
			continue
		}
		v, err := tr.FairLevel(i, AlgorithmFairTree, 1)
		if err != nil {
			t.Fatal(err)
		}
		p := tr.fsParent[i]
		if tr.shares[i] < tr.levelShares[i] && tr.raw[p] > tr.raw[i] {
			if math.Abs(v.LevelFS-1) > 1e-9 {
				t.Fatalf("user %s: LevelFS at its fair level %g: expected 1", a.User, v.LevelFS)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no user checked")
	}
	v, _ := tr.FairLevel(5, AlgorithmClassic, 2)
	if v.FairShare != math.Exp2(-0.5) {
		t.Fatalf("classic fair level %g with dampening 2: expected 2^-0.5", v.FairShare)
	}
}
