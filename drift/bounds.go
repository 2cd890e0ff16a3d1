package drift

import (
	"math"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// PassError describes how far apart the decay pass a database rebuild
// stands at and slurmctld's last pass may be, and what moves usage in
// between: decay of all of it, and the charge of the jobs then running.
type PassError struct {
	// Window is the largest distance between the two passes, in seconds:
	// the whole PriorityCalcPeriod when the phase of slurmctld's passes
	// is unknown, the uncertainty of the phase when it is known.
	Window float64
	// Decay is slurmctld's per-second decay factor (fairshare.Passes.D).
	Decay float64
	// Running is the billing rate of the jobs that ran in the last
	// PriorityCalcPeriod, per association of DB (subtree sums).
	Running []float64
	// Tails bound finished jobs' uncharged tails, which the passes'
	// moment decides without AccountingStorageEnforce=limits (nil:
	// none).
	Tails []Tails
	// TailLost is what slurmctld may not have charged of jobs that ended
	// just after a pass, before the pass reached them
	// (fairshare.Passes.LockWait), per association (nil: none).
	TailLost []float64
	// SincePass is how long, in seconds, before the report slurmctld's
	// last pass may have been under AccountingStorageEnforce=limits (0:
	// not), the time job ends may have raised RawUsage in since the
	// values computed at the pass.
	SincePass float64
	// Unrecorded is how long, in seconds, before the report slurmctld
	// may have charged a job's end that the database does not hold yet:
	// under AccountingStorageEnforce=limits it charges a job's last
	// partial interval when the job ends, and slurmdbd records the end a
	// moment later, so the rebuild still counts the job as running,
	// charged up to the last pass. Its running jobs' rate times it.
	Unrecorded float64
	// Period and BootUsage: usage charged before slurmctld's last start
	// was charged at the passes of the boots before, whose phase nobody
	// keeps, and weighs by them (a second charged at a pass Δ after the
	// one before weighs d^Δ·d^(since that pass): fairshare.Passes.JobUsageIn),
	// so each of its seconds may weigh up to d^∓Period against the phase
	// of today's passes. BootUsage is that usage per association of DB,
	// decayed to the report (nil: slurmctld's boot unknown, all of it may
	// be); Period is PriorityCalcPeriod in seconds (0: not considered).
	Period    float64
	BootUsage []float64
	// Unpriced is, per association of DB, what slurmctld may have charged
	// beyond the recorded billing of the jobs whose billing slurm.conf's
	// weights do not give (nil: none).
	Unpriced []float64
}

// Tails are finished jobs' uncharged tails cut at passes whose moment is
// known to Window seconds: each association's may be off by
// min(Window·Rate, Most) (usage.TailRisk). The tails of jobs that ended
// since slurmctld last started were cut at passes of its schedule now,
// whose phase is known; those before it, at a phase it no longer keeps.
type Tails struct {
	Window     float64
	Rate, Most []float64
}

// FactorBounds is how far each association's factor, vals computed under
// alg on t, may be from slurmctld's for what e leaves unknown of t's usage
// and resolution more (sshare's integer RawUsage: 1): the first-order
// bound of classic's FairShare, the rank range under Fair Tree, which it
// sets in vals (RankMin/RankMax; ties keep slurmctld's order when
// tieOrderKnown, and their range otherwise).
func (e PassError) FactorBounds(t *fairshare.Tree, alg fairshare.Algorithm, vals []fairshare.Values, resolution, damp float64, tieOrderKnown bool) []float64 {
	return factorBounds(t, e.Parts(t), alg, vals, resolution, damp, tieOrderKnown, 0)
}

// factorBounds is FactorBounds from parts, e.Parts(t), each account's
// usage known to accountTol of it more (relative): the usage part judges
// an account ok within the usage tolerance, so the order of sibling
// accounts that much apart is not known either, and a swap of them moves
// every user below (Fair Tree ranks users account by account, down the
// path: RankIntervals carries the ancestors' overlaps to them).
func factorBounds(t *fairshare.Tree, parts []result.UsageBound, alg fairshare.Algorithm, vals []fairshare.Values, resolution, damp float64, tieOrderKnown bool, accountTol float64) []float64 {
	extra := charge(parts)
	for i := range extra {
		if a := t.Association(i); !a.IsUser() {
			extra[i] += accountTol * a.RawUsage
		}
	}
	b := t.UsageBounds(alg, vals, resolution, extra, damp)
	out := make([]float64, len(b))
	if alg != fairshare.AlgorithmFairTree {
		for i := range b {
			out[i] = b[i].FairShare
		}
		return out
	}
	lfsErr := make([]float64, len(b))
	for i := range b {
		lfsErr[i] = b[i].LevelFS
		if tieOrderKnown {
			vals[i].RankMin, vals[i].RankMax = vals[i].Rank, vals[i].Rank
		}
	}
	lo, hi := t.RankIntervals(vals, lfsErr)
	for i := range vals {
		if a := t.Association(i); a.IsUser() {
			vals[i].RankMin, vals[i].RankMax = lo[i], hi[i]
			out[i] = vals[i].RankSpread(t.Users())
		}
	}
	return out
}

// charge is, per association, the part of its RawUsage bound (parts)
// that factors see: usage U at one pass is s·U + c at the other, s
// within d^±Window (decay, the same for every association, so it cancels
// in every ratio the algorithms take) and |c| at most the running charge
// over the window, decayed, and what finished jobs' tails may be off.
func charge(parts []result.UsageBound) []float64 {
	c := make([]float64, len(parts))
	for i, p := range parts {
		c[i] = p.Running + p.Unrecorded + p.Tails + p.EarlierBoots + p.Unpriced
	}
	return c
}

// Parts are, per association of t, bounds' RawUsage bound split by what
// leaves it unknown (without sshare's truncation, the reported side's).
func (e PassError) Parts(t *fairshare.Tree) []result.UsageBound {
	parts := make([]result.UsageBound, t.Len())
	if e.Window <= 0 && e.Unrecorded <= 0 && e.TailLost == nil && e.Tails == nil && e.Period <= 0 && e.Unpriced == nil {
		return parts
	}
	scale, boots := 1.0, 0.0
	if e.Decay > 0 && e.Decay < 1 {
		scale, boots = math.Pow(e.Decay, -e.Window), math.Pow(e.Decay, -e.Period)-1
	}
	for i := range parts {
		p := &parts[i]
		if e.Running != nil {
			p.Running = e.Running[i] * e.Window * scale
			p.Unrecorded = e.Running[i] * e.Unrecorded
		}
		for _, tl := range e.Tails {
			p.Tails += min(tl.Window*tl.Rate[i], tl.Most[i])
		}
		if e.TailLost != nil {
			p.Tails += e.TailLost[i]
		}
		if e.Unpriced != nil {
			p.Unpriced = e.Unpriced[i]
		}
		u := t.Association(i).RawUsage
		p.Decay = u * (scale - 1)
		if e.BootUsage != nil {
			u = min(u, e.BootUsage[i])
		}
		p.EarlierBoots = u * boots
	}
	return parts
}

// rowsRaw is raw's RawUsage for each association of rt, rt's own where
// raw has none (an association added since).
func rowsRaw(rt *fairshare.Tree, raw map[result.AssocKey]float64) []float64 {
	out := make([]float64, rt.Len())
	for i := range out {
		a := rt.Association(i)
		v, ok := raw[result.KeyOf(a.Account, a.User, a.Partition)]
		if !ok {
			v = a.RawUsage
		}
		out[i] = v
	}
	return out
}

// passGapCharge is, per row of rt, what jobs ending between slurmctld's
// pass and the read of PassRaw may have charged into it (nil: nothing to
// allow): their rate, from the database's running jobs, times PassGap.
// Without PassRaw (no pass seen since serve started) the report's own
// usage holds the ends charged since the pass (Pass.SincePass long):
// seen in the demo's first minutes, 21 Fair Tree level_fs beyond
// tolerance on a healthy cluster.
func (in *Input) passGapCharge(rt *fairshare.Tree) []float64 {
	gap := in.PassGap
	if in.PassRaw == nil {
		gap = in.Pass.SincePass
	}
	if gap <= 0 || in.DB == nil || in.Pass.Running == nil {
		return nil
	}
	rate := make(map[result.AssocKey]float64, in.DB.Len())
	for i := range in.DB.Len() {
		a := in.DB.Association(i)
		rate[result.KeyOf(a.Account, a.User, a.Partition)] = in.Pass.Running[i]
	}
	extra := make([]float64, rt.Len())
	for i := range extra {
		a := rt.Association(i)
		extra[i] = rate[result.KeyOf(a.Account, a.User, a.Partition)] * gap
	}
	return extra
}

// widenForPass allows each value computed at slurmctld's last decay pass
// to be anywhere between the replay and the replay on the usage at that
// pass (Input.PassRaw), which it returns.
func widenForPass(rt *fairshare.Tree, replay, bounds []fairshare.Values, passRaw map[result.AssocKey]float64, alg fairshare.Algorithm, damp float64) ([]fairshare.Values, error) {
	raw := rowsRaw(rt, passRaw)
	assocs := make([]fairshare.Association, rt.Len())
	for i := range assocs {
		assocs[i] = rt.Association(i)
		assocs[i].RawUsage = raw[i]
	}
	pt, err := fairshare.NewTree(assocs)
	if err != nil {
		return nil, err
	}
	at, err := pt.Compute(alg, damp)
	if err != nil {
		return nil, err
	}
	for i := range bounds {
		b, r, p := &bounds[i], &replay[i], &at[i]
		b.NormUsage += absDiff(r.NormUsage, p.NormUsage)
		b.EffectiveUsage += absDiff(r.EffectiveUsage, p.EffectiveUsage)
		b.FairShare += absDiff(r.FairShare, p.FairShare)
		if math.IsInf(r.LevelFS, 0) != math.IsInf(p.LevelFS, 0) {
			b.LevelFS = math.Inf(1)
		} else {
			b.LevelFS += absDiff(r.LevelFS, p.LevelFS)
		}
	}
	return at, nil
}

func nonNaN(n Num) Num {
	if math.IsNaN(float64(n)) {
		return 0
	}
	return n
}

func absDiff(a, b float64) float64 {
	d := math.Abs(a - b)
	if math.IsNaN(d) {
		return 0
	}
	return d
}
