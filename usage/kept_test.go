package usage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// keptJobs are finished jobs of three users in the six rolled-up hours
// before last, with what makes their tails weigh differently: fractional
// billing (priced), a spread, QOS factors 2 and 0 the rows do not carry,
// charges at submission, partial hours at both ends; and one job that
// started 30 minutes after the horizon of at, which the horizon passes
// later. hours are rows under them, so that no user's usage comes out
// near zero, where clamping would be the only difference seen.
func keptJobs(r *rand.Rand, last int64, at float64, p fairshare.Passes) (jobs []Job, hours []Row) {
	for i := range 300 {
		end := last - int64(r.IntN(6*3600))
		start := end - 1 - int64(r.IntN(3*3600))
		j := Job{Inx: uint64(i + 1), ID: uint32(i + 1), Assoc: uint32(3 + i%3), QOS: uint32(1 + i%3), Start: start, End: end,
			TRESAlloc: fmt.Sprintf("1=%d,4=1,5=%d", 1+i%7, 1+i%7)}
		if i%4 == 0 {
			j.Billed, j.Priced = float64(1+i%7)+0.5, true
		}
		if i%5 == 0 {
			j.Spread = 0.25
		}
		if i%6 == 0 && p.ChargeJobEnd {
			j.SubmitCharge = start - int64(r.IntN(600))
		}
		jobs = append(jobs, j)
	}
	rows, _ := Horizon(p, int64(at), 0)
	jobs = append(jobs, Job{Inx: 999, ID: 999, Assoc: 3, QOS: 1, Start: rows + 1800, End: last - 100, TRESAlloc: "1=2,4=1,5=2"})
	for h := rows - rows%3600; h < last; h += 3600 {
		for id := uint32(3); id <= 5; id++ {
			hours = append(hours, Row{Assoc: id, TRES: TRESBilling, Start: h, AllocSecs: 3600 * 40})
		}
	}
	return jobs, hours
}

// TestKeptTails: the finished jobs' tails kept from one refresh and
// decayed to later ones give what computing them at each refresh gives
// (derived here by Rebuild without Kept): raw usage, every TRES, the
// uncharged usage, the tail risk and the unpriced bound, at refreshes
// every 97 s for three hours, with and without limits; none is kept while
// the last rolled-up hour is within a PriorityCalcPeriod of the last
// pass; once the horizon passes the oldest job's start the kept tails
// stop serving, the result is the same, and none is kept again.
func TestKeptTails(t *testing.T) {
	const last = 1_800_003_600 // an hour's end
	assocs := []fairshare.Association{{Account: "root", Parent: -1}, {Account: "a", Parent: 0, Shares: 1},
		{Account: "a", User: "u1", Parent: 1, Shares: 1}, {Account: "a", User: "u2", Parent: 1, Shares: 1}, {Account: "a", User: "u3", Parent: 1, Shares: 1}}
	node := map[uint32]int{1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
	for _, limits := range []bool{false, true} {
		p := fairshare.Passes{HalfLife: 900, Period: 300, Phase: 18, ChargeJobEnd: limits, LockWait: 2}
		at1 := float64(last) + 330 // the pass at last+318 is a period past the hour
		jobs, hours := keptJobs(rand.New(rand.NewPCG(7, 8)), last, at1, p)
		in := Inputs{Assocs: assocs, Node: node, Passes: p, LastHourly: last, Hours: hours, Ended: jobs, HoursFrom: last - 6*3600,
			UsageFactor: map[uint32]float64{1: 1, 2: 2, 3: 0}}
		in.At = float64(last) + 200
		if in.KeepTails() != nil {
			t.Fatalf("limits %v: tails kept at %v, the last pass less than a period past the last hour", limits, in.At)
		}
		in.At = at1
		in.Kept = in.KeepTails()
		if in.Kept == nil {
			t.Fatalf("limits %v: no tails kept at %v", limits, in.At)
		}
		served, declined := 0, 0
		for at := at1; at < at1+3*3600; at += 97 {
			in.At = at
			if in.Kept.Serves(&in) {
				served++
			} else {
				declined++
			}
			kept, _ := Rebuild(in)
			fresh := in
			fresh.Kept = nil
			want, _ := Rebuild(fresh)
			compareUsage(t, fmt.Sprintf("limits %v, at+%.0f s", limits, at-at1), kept, want)
		}
		if served == 0 || declined == 0 {
			t.Errorf("limits %v: kept tails served %d refreshes and declined %d: want both, the horizon passing the oldest job's start", limits, served, declined)
		}
		if in.At = at1 + 3*3600; in.KeepTails() != nil {
			t.Errorf("limits %v: tails kept at %v, the horizon past the oldest job's start: they would not serve", limits, in.At)
		}
	}
}

// compareUsage fails unless got and want agree within 1e-9 relative in
// every part.
func compareUsage(t *testing.T, what string, got, want Usage) {
	t.Helper()
	parts := map[string][2][]float64{"raw": {got.Raw, want.Raw}, "uncharged": {got.Uncharged, want.Uncharged},
		"running": {got.Running, want.Running}, "unpriced": {got.Unpriced, want.Unpriced},
		"tail rate": {got.TailRisk.Rate, want.TailRisk.Rate}, "tail most": {got.TailRisk.Most, want.TailRisk.Most},
		"tail lost": {got.TailRisk.Lost, want.TailRisk.Lost}}
	for id, w := range want.TRES {
		parts[fmt.Sprintf("id_tres=%d", id)] = [2][]float64{got.TRES[id], w}
	}
	for name, p := range parts {
		if len(p[0]) != len(p[1]) {
			t.Errorf("%s: %s has %d associations, want %d", what, name, len(p[0]), len(p[1]))
			continue
		}
		for i := range p[1] {
			if g, w := p[0][i], p[1][i]; math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
				t.Errorf("%s: %s of association %d: kept %v, computed %v", what, name, i, g, w)
			}
		}
	}
}
