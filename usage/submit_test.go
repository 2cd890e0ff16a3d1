package usage

import (
	"math"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// TestSubmitCharge: slurmctld 26.05 with limits enforced charges each
// component of a heterogeneous job at its submission S as if it had run
// from the last pass before, g, to S (proc_req.c _het_job_val_rem →
// priority_p_job_end): B × F × Δ × d^Δ with Δ = S − g, B its billing, F
// its QOS UsageFactor, d = 1 − 0.693/HalfLife; every pass after g decays
// it, d^(last pass before the read − g). The components are the ones
// seen on the site-shaped cluster (billing 2.75 and 17.25, submitted 8 s
// after a pass), here with UsageFactors 1 and 0.5. The expected charge is
// computed here from the passes' period, phase and half-life alone; the
// rebuild with SubmitCharge set must exceed the one without by it, for a
// job still running after the last rollup (Jobs), one that ended in the
// re-read rolled-up hours (Ended), and one frozen with its hours (Base
// from Tails): the rows count none of it, on the rows' QOS split too.
func TestSubmitCharge(t *testing.T) {
	assocs, node := oneUser()
	p := fairshare.Passes{HalfLife: 3600, Period: 60, Phase: 20, ChargeJobEnd: true}
	factors := map[uint32]float64{1: 1, 2: 0.5}
	comps := func(g, start, end int64) []Job {
		s := g + 8
		return []Job{
			{Inx: 1, Assoc: 3, QOS: 1, Start: start, End: end, TRESAlloc: "1=2,5=2", Billed: 2.75, Priced: true, SubmitCharge: s},
			{Inx: 2, Assoc: 3, QOS: 2, Start: start, End: end, TRESAlloc: "1=17,5=17", Billed: 17.25, Priced: true, SubmitCharge: s},
		}
	}
	// want is slurmctld's charge per TRES (cpu, billing) at at of
	// components submitted 8 s after the pass g, a reset at since
	want := func(g int64, at, since float64) (cpu, billing float64) {
		s := float64(g + 8)
		if since >= s {
			return 0, 0 // the reset, at a pass after it, zeroed it
		}
		d := 1 - 0.693/p.HalfLife
		lastPass := p.Phase + math.Floor((at-p.Phase)/p.Period)*p.Period
		delta := s - float64(g)
		w := delta * math.Pow(d, delta) * math.Pow(d, lastPass-float64(g))
		return (2*1 + 17*0.5) * w, (2.75*1 + 17.25*0.5) * w
	}
	const lastHourly = 39600
	// the rows the ended ones make (38 s after g to 1000 s after, in the
	// hour from 36000), their QOS split weighed by UsageFactor
	rows := []Row{{Assoc: 3, TRES: TRESCPU, Start: 36000, AllocSecs: (2 + 17*0.5) * 962}, {Assoc: 3, TRES: TRESBilling, Start: 36000, AllocSecs: (2 + 17*0.5) * 962}}
	base := Inputs{Assocs: assocs, Node: node, Passes: p, UsageFactor: factors, Hours: rows, LastHourly: lastHourly, HoursFrom: 36000, AllTRES: true, RowsByQOS: true}
	for _, tc := range []struct {
		name    string
		g       int64 // the pass before the submission: 20 + k·60
		at      float64
		since   float64
		running bool
		frozen  bool
	}{
		{name: "running, read before the next pass", g: 39620, at: 39668, running: true},
		{name: "running, read passes later", g: 39620, at: 40600, running: true},
		{name: "ended in the re-read hours", g: 36020, at: 40600},
		{name: "frozen with its hours", g: 36020, at: 40600, frozen: true},
		{name: "reset after the submission", g: 36020, at: 40600, since: 36080},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rebuild := func(charged bool) Usage {
				in := base
				in.At, in.Since = tc.at, tc.since
				jobs := comps(tc.g, tc.g+38, tc.g+1000)
				if tc.running {
					jobs = comps(tc.g, tc.g+38, 0)
				}
				for i := range jobs {
					if !charged {
						jobs[i].SubmitCharge = 0
					}
				}
				switch {
				case tc.running:
					in.Jobs = jobs
				case tc.frozen:
					in.Base, _ = in.Tails(jobs, false)
				default:
					in.Ended = jobs
				}
				u, problems := Rebuild(in)
				if len(problems) > 0 {
					t.Fatal(problems)
				}
				return u
			}
			with, without := rebuild(true), rebuild(false)
			cpu, billing := want(tc.g, tc.at, tc.since)
			if got := with.Raw[2] - without.Raw[2]; math.Abs(got-billing) > 1e-9*math.Max(1, billing) {
				t.Errorf("billing charged at submission %.6f, slurmctld %.6f", got, billing)
			}
			if got := userTRES(with, TRESCPU) - userTRES(without, TRESCPU); math.Abs(got-cpu) > 1e-9*math.Max(1, cpu) {
				t.Errorf("cpu charged at submission %.6f, slurmctld %.6f", got, cpu)
			}
		})
	}
}

// userTRES is oneUser's user's usage of a TRES (0 where none is kept).
func userTRES(u Usage, id uint32) float64 {
	if s := u.TRES[id]; s != nil {
		return s[2]
	}
	return 0
}
