package build

import (
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// PassError is what the unknown moment of slurmctld's last decay pass
// leaves unknown of the inputs' usage, for a report read from start to
// end (nil: its moment is not in question): the phase's uncertainty, or
// the whole PriorityCalcPeriod when a pass may have fallen during the
// read, which then shows either side of it; under limits, job ends
// slurmctld charged since the pass that the database does not hold yet.
func (in *Inputs) PassError(read *[2]time.Time) drift.PassError {
	at := fairshare.Seconds(in.Computed)
	if read != nil {
		at = fairshare.Seconds(read[1])
	}
	w := in.Phase.Uncertainty.Seconds()
	if _, near := in.NearPass(read); near {
		w = in.Passes.Period
	}
	w = max(w, in.missedPasses(at))
	pe := drift.PassError{Window: w, Decay: in.Passes.D(), Running: in.Running, Tails: in.tails(), TailLost: in.TailRisk.Lost,
		Period: in.Passes.Period, BootUsage: in.BootUsage, Unpriced: in.Unpriced}
	if in.Passes.ChargeJobEnd && in.Passes.Period > 0 {
		pe.SincePass = min(at-in.Passes.LastPass(at)+w, in.Passes.Period)
		if !in.EndsRecorded(read) {
			pe.Unrecorded = pe.SincePass
		}
	}
	return pe
}

// missedPasses is how long slurmctld has run no decay pass at at,
// beyond a period, where its state file says when it ran the last (0
// otherwise): down, or restarted and not yet at its first pass, it has
// neither charged its jobs nor decayed its usage since, which its first
// pass does at once; the database's usage is rebuilt as if it had.
func (in *Inputs) missedPasses(at float64) float64 {
	if in.Phase.Source != result.PhaseStateFile || in.Phase.Last.IsZero() || in.Passes.Period <= 0 {
		return 0
	}
	if gap := at - fairshare.Seconds(in.Phase.Last); gap > in.Passes.Period+in.Phase.Uncertainty.Seconds() {
		return gap
	}
	return 0
}

// RecordDelay is how long after a job's end its record is in job_table
// while slurmctld and slurmdbd both run: slurmctld sends the end to
// slurmdbd as it happens. Measured (make end-records, docs/serve.md): at
// most 1.6 s on 22.05, 24.11 and 26.05, a burst of a hundred ends at once
// included.
const RecordDelay = 3 * time.Second

// EndsRecorded says whether the database was read at least RecordDelay
// after the report read from start to end: every job end slurmctld had
// charged by then is in it, and none is left for the unrecorded-ends part
// of the bound (slurmdbd or slurmctld down meanwhile aside: ends then
// wait for them, as new jobs do).
func (in *Inputs) EndsRecorded(read *[2]time.Time) bool {
	return read != nil && !in.ReadAt.IsZero() && in.ReadAt.Sub(read[1]) >= RecordDelay
}

// Near is slurmctld's decay pass a report may have been read across,
// and how far from it a rebuild of the database falls on one side of it:
// the phase's uncertainty and a moment.
type Near struct {
	Pass  time.Time
	Clear time.Duration
}

// Before and After are the moments the database stands on either side
// of the pass at.
func (n Near) Before() time.Time { return n.Pass.Add(-n.Clear) }
func (n Near) After() time.Time  { return n.Pass.Add(n.Clear) }

// NearPass is slurmctld's pass that may have fallen during the read (ok
// false: none, or the phase unknown): the report shows either side of it.
// A report is one snapshot, on one side for every association, and
// which side is decided by one of two policies, each named: serve's
// (ShownAfter), whose reads are timed around the passes, and check's
// (check.Database.CompareSides), whose lone read is judged against both.
// A read on neither policy's side is judged against the database at its
// moment within the whole period (PassError).
func (in *Inputs) NearPass(read *[2]time.Time) (n Near, ok bool) {
	if read == nil || in.Phase.Source == result.PhaseUnknown || in.Passes.Period <= 0 {
		return n, false
	}
	w := in.Phase.Uncertainty.Seconds()
	start, end := fairshare.Seconds(read[0]), fairshare.Seconds(read[1])
	p := in.Passes.LastPass(end + w)
	return Near{Pass: time.Unix(0, int64(p*1e9)), Clear: in.passClear()}, p >= start-w
}

// ShownAfter is serve's policy for a report read from read[0] to
// read[1] near a pass: when a pass fell since the read before (sawPass),
// which began passGap before read[1] and after the pass a period earlier
// could have fallen, the pass seen is this one, and the report shows the
// side after it. It is then judged against the database just after the
// pass (Near.After) to the phase's uncertainty, not against the whole
// period either side would allow (ok false: not near a pass, or not
// known to be after it).
func (in *Inputs) ShownAfter(read [2]time.Time, sawPass bool, passGap time.Duration) (n Near, ok bool) {
	n, near := in.NearPass(&read)
	period := time.Duration(in.Passes.Period * float64(time.Second))
	return n, near && sawPass && read[1].Add(-passGap).After(n.Pass.Add(in.Phase.Uncertainty-period))
}

// AtReport is how the database (in) is judged against a report read over
// read (nil: at the moment in was computed for, or a read whose side of
// a pass a policy chose): the pass error, and the phase whose uncertainty
// is the error's window. serve, check and explain show this phase.
func (in *Inputs) AtReport(read *[2]time.Time) (drift.PassError, result.Phase) {
	pe := in.PassError(read)
	phase := in.Phase
	phase.Uncertainty = time.Duration(pe.Window * float64(time.Second))
	return pe, phase
}

// SincePass is slurmctld's last pass before the read (nil: at the
// moment in was computed for), when jobs may have ended since and been
// charged to RawUsage, which the values computed at the pass do not
// follow (drift.Input.PassRaw): under AccountingStorageEnforce=limits,
// the phase known and the read clear of the pass (ok false otherwise).
// Near.After is where the database stands for those values.
func (in *Inputs) SincePass(read *[2]time.Time) (n Near, ok bool) {
	if !in.Passes.ChargeJobEnd || in.Phase.Source == result.PhaseUnknown || in.Passes.Period <= 0 {
		return n, false
	}
	if _, near := in.NearPass(read); near {
		return n, false
	}
	end := in.Computed
	if read != nil {
		end = read[0]
	}
	p := in.Passes.LastPass(fairshare.Seconds(end))
	n = Near{Pass: time.Unix(0, int64(p*1e9)), Clear: in.passClear()}
	return n, n.After().Before(end)
}

// passClear is Near.Clear: the phase's uncertainty and a moment.
func (in *Inputs) passClear() time.Duration { return in.Phase.Uncertainty + 500*time.Millisecond }
