// Package build turns what was read of a cluster into what is published
// (Build: Inputs to result.Cluster): both algorithms' values, the drift
// against what Slurm reported and the error the database's unknowns
// explain, factor ranges, pending jobs' priorities and the recovery
// forecast. It is pure: what it computes from arrives as plain data,
// read by engine.
package build

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// Settings are a cluster's priority settings.
type Settings struct {
	Algorithm fairshare.Algorithm
	Dampening float64
	Config    result.Config
}

// Reported is what Slurm reported, and when, with the database it is
// judged against.
type Reported struct {
	Out *shares.Table
	At  time.Time
	// PrevRaw is RawUsage per association from the report taken before
	// slurmctld's last decay pass (nil: none): classic values lag by one
	// pass (fairshare.ClassicLagged).
	PrevRaw map[result.AssocKey]float64
	// PassRaw is RawUsage from the first report after slurmctld's last
	// decay pass seen (drift.Input.PassRaw; nil: none or this one).
	PassRaw map[result.AssocKey]float64
	PassGap time.Duration
	// Settling: drift.Input.Settling
	Settling bool
	// DB is the database's tree rebuilt at At (nil: Inputs.Tree is), with
	// what is known of the pass it stands at and whether it is in
	// slurmctld's order (nil DB: Inputs' own). The order is the tree's:
	// the Inputs a report is published with may be of a refresh made
	// before slurmctld's boot was known, and judged by theirs a tree in
	// slurmctld's order counted its tie ranges on both sides.
	DB              *fairshare.Tree
	Pass            drift.PassError
	DBTieOrderKnown bool
	Phase           result.Phase
	// Memo, shared by every Reported made of one reading (nil: none), keeps
	// Build's comparison with it: the report and the database's tree at
	// its moment change only with the next reading, while Build runs after
	// every refresh, and the comparison is most of Build's time at a
	// large tree (docs/performance.md).
	Memo *ReportMemo
}

// ReportMemo holds the comparison of one report with what it was made for.
type ReportMemo struct {
	key memoKey
	rc  *drift.Comparison
}

type memoKey struct {
	algorithm fairshare.Algorithm
	dampening float64
	tolerance drift.Tolerance
	tieOrder  bool
	db        *fairshare.Tree
	lagged    bool
	passLag   bool
	window    float64
	named     int
	// losses counted: a new loss is new evidence for the diagnosis
	losses int
}

// Inputs are everything Build needs for one cluster, in groups of plain
// data: what the engine read of the database (Database), the options of
// the output (Options) and what serve's loop keeps between builds
// (Kept). Slices are indexed like Tree.
type Inputs struct {
	Name     string
	Settings Settings
	Database
	Options
	Kept
}

// Database is what the engine read of a cluster at one moment.
type Database struct {
	// Tree holds the database's associations with their rebuilt RawUsage,
	// in slurmctld's order when TieOrderKnown.
	Tree          *fairshare.Tree
	TieOrderKnown bool
	// AssocIDs are the id_assoc of each tree association (nil: not a
	// database's).
	AssocIDs []uint32
	// Boot is when slurmctld started, where known (the local cluster):
	// its passes keep one phase since.
	Boot time.Time
	// Passes are slurmctld's decay passes as the usage was rebuilt for
	// them; Phase says how well their moment is known (an unknown one
	// leaves usage off by up to one PriorityCalcPeriod of decay and
	// charge). Running is the billing rate of the jobs that ran in the
	// last PriorityCalcPeriod per association: with Phase, what drift is
	// judged against (drift.PassError).
	Passes   fairshare.Passes
	Phase    result.Phase
	Running  []float64
	TailRisk usage.TailRisk
	// Unpriced is what slurmctld may have charged beyond the recorded
	// billing of jobs billed by other weights (usage.Usage.Unpriced).
	Unpriced []float64
	// BootTails is the part of TailRisk (Rate and Most) of the jobs that
	// ended before slurmctld's boot, whose tails were cut at another
	// phase (nil: the boot or the phase unknown, every tail is).
	BootTails *usage.TailRisk
	// BootUsage is, per association, the usage charged before slurmctld's
	// boot, decayed to Computed (nil: the boot unknown, all of it may be):
	// charged at the passes of earlier boots (drift.PassError.BootUsage).
	BootUsage []float64
	// TRES is decayed usage per TRES name; Uncharged, Pending (has pending
	// jobs) and MauiUsage (windowed usage fraction) may be nil.
	TRES      map[string][]float64
	Uncharged []float64
	Pending   []bool
	MauiUsage []float64
	// LastRollup is zero before the first hourly rollup.
	LastRollup, Computed time.Time
	// ReadAt is when, on the engine's clock, the jobs were read from the
	// database (zero: not known, as for a dump replayed with --at).
	ReadAt time.Time
	// Schema is the database schema the tables were read by (nil: not a
	// database).
	Schema *result.Schema
	// Priorities are the pending jobs (nil: not computed).
	Priorities *Priorities
	// Billing: see result.Cluster.Billing.
	Billing []result.Billing
	// ForecastJobs are the jobs running at Computed, ForecastRate each
	// association's own usage rate over the last ForecastWindow (billing
	// per second); nil unless the engine read them for the forecast.
	ForecastJobs   []fairshare.RunningJob
	ForecastRate   []float64
	ForecastWindow time.Duration
}

// Options are what the output is asked for.
type Options struct {
	Maui      fairshare.MauiConfig
	Tolerance drift.Tolerance
	// Named is how many associations drifting the most on usage Build
	// names (drift.Input.Named; 0: none).
	Named int
	// Detail asks Build for explain's detail: each factor's range over
	// the possible pass moments (result.Association.Range,
	// result.Job.Range) and each pending job's priority (Cluster.Jobs).
	// serve publishes neither: the metrics hold the jobs' groups.
	Detail bool
}

// Kept is what serve's loop keeps of a cluster between builds.
type Kept struct {
	// Reported is nil when no report is fresh.
	Reported *Reported
	// Memo, kept per cluster across refreshes (nil: none), saves
	// computing the same associations again.
	Memo *BuildMemo
	// Recovery is the last computation of ComputeRecovery (nil: none).
	Recovery *result.Recovery
	// Losses are the usage losses the reports showed (nil: none read).
	Losses *result.Losses
}

// Build computes a cluster's published values.
func Build(in *Inputs) (result.Cluster, error) {
	cl := result.Cluster{Name: in.Name, Algorithm: in.Settings.Algorithm, Config: in.Settings.Config, LastRollup: in.LastRollup, Computed: in.Computed, Losses: in.Losses, Billing: in.Billing,
		Schema: in.Schema}
	var rc *drift.Comparison
	if in.Reported != nil {
		var err error
		if rc, err = memoCompare(in); err != nil {
			return cl, fmt.Errorf("cluster %s: report of %s: %w", in.Name, in.Reported.At.Format(time.RFC3339), err)
		}
		cl.Drift, cl.Applied, cl.Phase, cl.Named = rc.Drift, rc.Applied, in.Reported.Phase, rc.Named
		if in.Reported.DB == nil {
			cl.Phase = in.Phase
		}
	}
	m := in.Memo
	if m == nil {
		m = &BuildMemo{}
	}
	if !m.holds(in, rc) {
		m.assocs, m.tresNames = buildAssocs(in, rc)
	}
	m.keep(in, rc)
	cl.Assocs, cl.TRESNames = m.assocs, m.tresNames
	cl.Jobs, cl.Pending = jobPriorities(in, m.assocs)
	if in.Recovery != nil {
		cl.RecoveryComputed = in.Recovery.Computed
	}
	if in.Priorities != nil {
		cl.Weights = in.Priorities.Config.Weights
	}
	return cl, nil
}

// BuildMemo keeps Build's per-association values for the next Build of the
// same cluster. Between slurmctld's decay passes a refresh finds the same
// tree, usage and report, and computing them again was 4.5 of the build
// stage's 5 ms at 11k associations (BenchmarkBuild). Published snapshots
// share the kept associations, which nothing changes.
type BuildMemo struct {
	// what they were computed from
	tree      *fairshare.Tree
	settings  Settings
	tres      map[string][]float64
	uncharged []float64
	pending   []bool
	mauiUsage []float64
	maui      fairshare.MauiConfig
	rc        *drift.Comparison
	detail    bool
	recovery  *result.Recovery

	assocs    []result.Association
	tresNames []string
}

// holds reports whether m's values are those of in and rc.
func (m *BuildMemo) holds(in *Inputs, rc *drift.Comparison) bool {
	return m.assocs != nil && m.rc == rc && m.detail == in.Detail && m.recovery == in.Recovery && m.settings == in.Settings && m.maui == in.Maui && m.tree.Same(in.Tree) &&
		maps.EqualFunc(m.tres, in.TRES, slices.Equal) && slices.Equal(m.uncharged, in.Uncharged) &&
		slices.Equal(m.pending, in.Pending) && slices.Equal(m.mauiUsage, in.MauiUsage)
}

// keep records in and rc as what m's values are of: the newest equal
// inputs, so that the memo holds no older generation alive.
func (m *BuildMemo) keep(in *Inputs, rc *drift.Comparison) {
	m.tree, m.settings, m.tres, m.uncharged, m.pending, m.mauiUsage, m.maui, m.rc, m.detail, m.recovery =
		in.Tree, in.Settings, in.TRES, in.Uncharged, in.Pending, in.MauiUsage, in.Maui, rc, in.Detail, in.Recovery
}

// buildAssocs computes every association's published values.
func buildAssocs(in *Inputs, rc *drift.Comparison) (assocs []result.Association, tresNames []string) {
	s := in.Settings
	t := in.Tree
	classic := t.Classic(fairshare.ClassicOptions{Dampening: s.Dampening})
	ft := t.FairTree()
	n := t.Len()
	assocs = make([]result.Association, n)
	// one backing array for every association's TRES: a map each was 40%
	// of Build at 11k associations
	tresNames = slices.Sorted(maps.Keys(in.TRES))
	tres := make([]float64, n*len(tresNames))
	var ticket []fairshare.Values
	if in.Pending != nil {
		ticket, _ = t.TicketBased(in.Pending, s.Dampening)
	}
	var ranges []result.FactorRange
	if in.Detail {
		ranges = in.factorRanges()
	}
	for i := range n {
		a := t.Association(i)
		o := &assocs[i]
		o.Account, o.User, o.Partition, o.Shares, o.RawUsage = a.Account, a.User, a.Partition, a.Shares, a.RawUsage
		if in.AssocIDs != nil {
			o.ID = in.AssocIDs[i]
		}
		if a.Parent >= 0 {
			o.Parent = t.Association(a.Parent).Account
		}
		o.Classic, o.FairTree = classic[i], ft[i]
		o.TicketBased, o.Maui, o.Uncharged, o.Recovery = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if in.Recovery != nil {
			if s, ok := in.Recovery.Seconds[result.KeyOf(a.Account, a.User, a.Partition)]; ok {
				o.Recovery = s
			}
		}
		o.ReportedFactor, o.ReportedUsage = math.NaN(), math.NaN()
		if ticket != nil {
			o.TicketBased = ticket[i].FairShare
		}
		if in.MauiUsage != nil {
			o.Maui = fairshare.MauiComponent(in.MauiUsage[i], classic[i].NormShares, fairshare.Target, in.Maui)
		}
		if in.Uncharged != nil {
			o.Uncharged = in.Uncharged[i]
		}
		if ranges != nil {
			o.Range = &ranges[i]
		}
		if k := len(tresNames); k > 0 {
			o.TRES = tres[i*k : (i+1)*k : (i+1)*k]
			for j, name := range tresNames {
				o.TRES[j] = in.TRES[name][i]
			}
		}
		if rc == nil {
			continue
		}
		if r := rc.Row(result.KeyOf(o.Account, o.User, o.Partition)); r != nil {
			o.ReportedFactor, o.ReportedUsage = r.FairShare, r.RawUsage
		}
	}
	return assocs, tresNames
}

// memoCompare is drift.CompareReport of the inputs' report, computed once
// per report and inputs.
func memoCompare(in *Inputs) (*drift.Comparison, error) {
	db, pass, tieOrder := in.Reported.DB, in.Reported.Pass, in.Reported.DBTieOrderKnown
	if db == nil {
		db, pass, tieOrder = in.Tree, in.PassError(nil), in.TieOrderKnown
	}
	var losses []result.UsageLoss
	seen := 0
	if in.Losses != nil {
		// empty, not nil: reads were compared and saw no loss
		losses = append([]result.UsageLoss{}, in.Losses.Last...)
		for _, n := range in.Losses.Counts {
			seen += n
		}
	}
	key := memoKey{in.Settings.Algorithm, in.Settings.Dampening, in.Tolerance, tieOrder, db, in.Reported.PrevRaw != nil, in.Reported.PassRaw != nil, pass.Window, in.Named, seen}
	m := in.Reported.Memo
	if m != nil && m.rc != nil && m.key == key {
		return m.rc, nil
	}
	rc, err := drift.CompareReport(drift.Input{Algorithm: in.Settings.Algorithm, Dampening: in.Settings.Dampening, Tolerance: in.Tolerance,
		Report: in.Reported.Out, PrevRaw: in.Reported.PrevRaw, PassRaw: in.Reported.PassRaw, PassGap: in.Reported.PassGap.Seconds(), DB: db, TieOrderKnown: tieOrder, Pass: pass, Settling: in.Reported.Settling,
		Losses: losses, Named: in.Named}, false)
	if err == nil && m != nil {
		m.key, m.rc = key, rc
	}
	return rc, err
}

// passJitter is how far a pass may fall from the schedule of its
// slurmctld's boot. _decay_thread sleeps to absolute deadlines, each one
// PriorityCalcPeriod after the last from the thread's start
// (priority_multifactor.c: abs.tv_sec += priority_calc_period, the same
// in 22.05, 24.11 and 26.05), so passes do not drift; a pass takes its
// moment from time(NULL) on waking, a whole second that the start's
// fraction and the wake-up's latency may carry one second further
// (measured: docs/serve.md#pass-schedule).
const passJitter = time.Second

// tails are the finished jobs' tails by the passes that cut them: those
// of jobs that ended since slurmctld last started at this boot's phase
// (its uncertainty and passJitter), the others (BootTails) at any phase
// of a period. Without the boot or the phase, every tail may be off by a
// period.
func (in *Inputs) tails() []drift.Tails {
	t := in.TailRisk
	if t.Rate == nil {
		return nil
	}
	period := in.Passes.Period
	if in.Phase.Source == result.PhaseUnknown || in.BootTails == nil {
		return []drift.Tails{{Window: period, Rate: t.Rate, Most: t.Most}}
	}
	before := in.BootTails
	after := drift.Tails{Window: (in.Phase.Uncertainty + passJitter).Seconds(), Rate: make([]float64, len(t.Rate)), Most: make([]float64, len(t.Most))}
	for i := range t.Rate {
		after.Rate[i] = max(0, t.Rate[i]-before.Rate[i])
		after.Most[i] = max(0, t.Most[i]-before.Most[i])
	}
	return []drift.Tails{after, {Window: period, Rate: before.Rate, Most: before.Most}}
}

// factorRanges are, per association of in.Tree, the classic and Fair Tree
// factors over every moment slurmctld's last decay pass may have fallen
// at (PassError): where the phase is unknown, explain gives the factor as
// this range, which holds what Slurm reports.
func (in *Inputs) factorRanges() []result.FactorRange {
	t, pass, damp := in.Tree, in.PassError(nil), in.Settings.Dampening
	out := make([]result.FactorRange, t.Len())
	classic := t.Classic(fairshare.ClassicOptions{Dampening: damp})
	b := pass.FactorBounds(t, fairshare.AlgorithmClassic, classic, 0, damp, in.TieOrderKnown)
	ft := t.FairTree()
	pass.FactorBounds(t, fairshare.AlgorithmFairTree, ft, 0, damp, in.TieOrderKnown)
	users := float64(t.Users())
	for i := range out {
		f := classic[i].FairShare
		out[i].Classic = [2]float64{math.Max(0, f-b[i]), math.Min(1, f+b[i])}
		out[i].FairTree = [2]float64{math.NaN(), math.NaN()}
		if a := t.Association(i); a.IsUser() && users > 0 {
			out[i].FairTree = [2]float64{float64(ft[i].RankMin) / users, float64(ft[i].RankMax) / users}
		}
	}
	return out
}
