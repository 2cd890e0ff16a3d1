package drift

import (
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Tolerance is how much drift is allowed, on top of what the inputs'
// precision explains, before an association counts as drifting. The
// defaults are justified in docs/serve.md by measurement against real
// Slurm.
type Tolerance struct {
	// Formula is absolute: Slurm's values against the algorithm replayed
	// on Slurm's own usage.
	Formula float64
	// Usage is relative: the database's RawUsage against Slurm's.
	Usage float64
	// Factor is absolute: the factor computed from the database's usage
	// against the one computed from Slurm's.
	Factor float64
}

// DefaultTolerance: measured formula drift is below 1e-6 beyond print
// precision, usage drift below 0.01%, on real Slurm 22.05.
var DefaultTolerance = Tolerance{Formula: 1e-4, Usage: 0.005, Factor: 0.01}

// Input is a report and what it is compared with.
type Input struct {
	Algorithm fairshare.Algorithm
	Dampening float64
	Tolerance Tolerance
	Report    *shares.Table
	// PrevRaw is RawUsage per association from the report taken before
	// slurmctld's last decay pass (nil: none): classic values lag by one
	// pass (fairshare.ClassicLagged).
	PrevRaw map[result.AssocKey]float64
	// PassRaw is RawUsage per association from the first report after
	// slurmctld's last decay pass (nil: none, or this report): with
	// AccountingStorageEnforce=limits a job's end charges its last
	// partial interval at once, while the values computed at the pass
	// (NormUsage, EffectvUsage, LevelFS, FairShare, the rank) stay until
	// the next one. Each may then lie between the replay on the report's
	// usage and the replay on PassRaw.
	PassRaw map[result.AssocKey]float64
	// PassGap is how long, in seconds, after slurmctld's pass the report
	// PassRaw comes from may have been read (the bracket it closed): jobs
	// ending in between were charged into it already, at most the
	// running jobs' rate (Pass.Running) times the gap.
	PassGap float64
	// InferLag, with no PrevRaw and the classic algorithm, tells drift that
	// slurmctld's one-pass lag explains from drift it does not: slurmctld
	// computes the accounts' NormUsage at the start of each pass, so the
	// report's own accounts' NormUsage stands for the usage then, and an
	// entry whose values match fairshare.ClassicLagged on that usage
	// within the inputs' precision is StatusLagNotExcluded, not drift.
	// Only when the report shows usage charged during the last pass (an
	// account's NormUsage off its RawUsage share, or TRESRunMins not 0),
	// and only with entries (check, on a report with no earlier one).
	InferLag bool
	// DB is the database's tree rebuilt at the report's moment (nil: the
	// report is only replayed, as check does without a database).
	DB *fairshare.Tree
	// TieOrderKnown: DB is in slurmctld's order (its boot time is
	// known), so tied Fair Tree siblings rank as slurmctld ranks them.
	TieOrderKnown bool
	// Pass is what DB's usage may miss of slurmctld's: the decay pass DB
	// was rebuilt for and slurmctld's last one may be Pass.Window apart
	// (zero: none).
	Pass PassError
	// Settling: slurmctld has started since the last decay pass seen
	// between two reads of it. Until one is, the values it computes at a
	// pass (NormUsage, EffectvUsage, LevelFS, FairShare, the rank) are
	// not yet computed from what it reports beside them (a soak's only
	// false alarm came 45 s after a restart): formula drift is measured
	// but not judged, its bound infinite. Nor has the database yet the
	// jobs slurmctld ran while slurmdbd could not record them: usage
	// slurmctld holds beyond the database's, and the factors and ranks,
	// are measured but not judged; usage it lacks is (compareUsage).
	Settling bool
	// Losses are the usage losses seen between reads of slurmctld
	// (nil: none were compared, as in check): the evidence that tells a
	// reset or a restart from other causes of usage drift (diagnose).
	Losses []result.UsageLoss
	// Named is how many of the associations drifting the most on usage
	// Comparison.Named names (0: none).
	Named int
}

// RawByKey is the report's RawUsage by association: what a later report
// takes as the usage before slurmctld's last decay pass (Input.PrevRaw).
func RawByKey(out *shares.Table) map[result.AssocKey]float64 {
	raw := make(map[result.AssocKey]float64, len(out.Rows))
	for _, r := range out.Rows {
		raw[result.KeyOf(r.Account, r.User, r.Partition)] = r.RawUsage
	}
	return raw
}

// RawOfTree is t's RawUsage by association, as RawByKey is a report's: a
// database's tree standing for the usage slurmctld computed a pass's
// values from (Input.PassRaw).
func RawOfTree(t *fairshare.Tree) map[result.AssocKey]float64 {
	raw := make(map[result.AssocKey]float64, t.Len())
	for i := range t.Len() {
		a := t.Association(i)
		raw[result.KeyOf(a.Account, a.User, a.Partition)] = a.RawUsage
	}
	return raw
}
