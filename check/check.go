// Package check answers "does our fairshare agree with Slurm's?" for the
// check command: it replays what Slurm reports (formula drift, the
// one-pass lag of classic) or compares it with the database's rebuilt
// usage (build.Inputs), and writes the drift report as a table or JSON.
// It reads no file, database or process itself; drift is told as a
// value, not an exit.
package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// DepthObliviousNote heads every depth_oblivious report.
const DepthObliviousNote = "depth_oblivious is best effort: slurmctld sums siblings' normalized usage that it computes lazily, mixing values from different moments"

// unknownPhaseNote: without the pass phase a live read cannot be placed
// between two passes.
const unknownPhaseNote = "phase of the decay passes unknown (no readable priority_last_decay_ran of the slurmctld boot running at the moment checked, and none inferred): usage is judged against one PriorityCalcPeriod of decay and running jobs' charge"

// Pick is --algorithm: auto (the empty string too) is the algorithm
// found from the input.
func Pick(flag string, auto fairshare.Algorithm) fairshare.Algorithm {
	if flag == "auto" || flag == "" {
		return auto
	}
	return fairshare.Algorithm(flag)
}

// Replay is replay mode's settings: the report is its own input.
type Replay struct {
	Algorithm string  // --algorithm: auto, or a fairshare.Algorithm
	Dampening float64 // FairShareDampeningFactor
	Tolerance float64 // formula drift, drift.Tolerance.Formula
}

// Compare replays one report. prevRaw is RawUsage from the report taken
// before slurmctld's last decay pass (nil: none; then the one-pass lag
// is inferred from the report itself, drift.Input's InferLag); passRaw
// from the first report after that pass (drift.Input.PassRaw; nil: none,
// or this one). Errors start with name.
func (c Replay) Compare(out *shares.Table, prevRaw, passRaw map[result.AssocKey]float64, name string) (*drift.Report, error) {
	out.FillMissingFactor(c.Dampening)
	alg := Pick(c.Algorithm, out.Algorithm())
	cmp, err := drift.CompareReport(drift.Input{Algorithm: alg, Dampening: c.Dampening, Tolerance: drift.Tolerance{Formula: c.Tolerance}, Report: out,
		PrevRaw: prevRaw, PassRaw: passRaw, InferLag: prevRaw == nil}, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rep := cmp.Formula
	var notes []string
	if cmp.Lag != "" {
		notes = append(notes, cmp.Lag)
	}
	rep.Note = note(notes, alg)
	return rep, nil
}

// note joins a report's notes, depth_oblivious's last.
func note(notes []string, alg fairshare.Algorithm) string {
	if alg == fairshare.AlgorithmDepthOblivious {
		notes = append(notes, DepthObliviousNote)
	}
	return strings.Join(notes, "; ")
}

// Database is database mode's comparison of one report with the
// database.
type Database struct {
	Reported *shares.Table
	// Window is when Reported was read (nil: at the moment Refresh
	// rebuilt usage for).
	Window *[2]time.Time
	// PassRaw and PassGap are drift.Input's, from the tracker that read
	// Reported live (nil, 0: read from a file).
	PassRaw map[result.AssocKey]float64
	PassGap time.Duration
	// Losses are the usage losses the reads of Reported showed (nil: read
	// once, or from a file): the evidence of a reset (drift.Input.Losses).
	Losses []result.UsageLoss
	// Settling: slurmctld started within the reads' last two periods and
	// no pass has been seen since (engine.Reading.Settling): usage it
	// holds beyond the database's is measured, not judged
	// (drift.Input.Settling).
	Settling  bool
	Algorithm fairshare.Algorithm
	Tolerance drift.Tolerance
}

// Compare is the comparison serve makes, association by association: the
// database's usage (in) against Slurm's, with Slurm's formula beside it.
func (d Database) Compare(in *build.Inputs) (*drift.Report, error) {
	var notes []string
	if in.Phase.Source == result.PhaseUnknown {
		notes = append(notes, unknownPhaseNote)
	}
	d.Reported.FillMissingFactor(in.Settings.Dampening)
	pass, phase := in.AtReport(d.Window)
	cmp, err := drift.CompareReport(drift.Input{Algorithm: d.Algorithm, Dampening: in.Settings.Dampening, Tolerance: d.Tolerance,
		Report: d.Reported, DB: in.Tree, TieOrderKnown: in.TieOrderKnown, Pass: pass, PassRaw: d.PassRaw, PassGap: d.PassGap.Seconds(), InferLag: true,
		Losses: d.Losses, Settling: d.Settling}, true)
	if err != nil {
		return nil, err
	}
	rep := cmp.Usage
	rep.Phase = &result.Phase{Source: phase.Source, Uncertainty: phase.Uncertainty}
	rep.Formula = cmp.Formula
	rep.Billing = in.Billing
	rep.Note = note(notes, d.Algorithm)
	return rep, nil
}

// CompareSides is Compare for a report read so close to slurmctld's pass
// that it may show either side of it (build.Inputs.NearPass): before
// and after are the database just before and just after that pass. A
// report is one snapshot, on one side for every association, so it is
// judged against the side more of its associations' RawUsage agrees
// with, with the phase's own uncertainty instead of the whole period
// that either side allows (a user's 10% loss hid under a
// period's charge of its running jobs). A loss cannot pick the side: it
// moves one chain, and every association with running jobs or decayed
// usage votes; a tie keeps the side the read's moment is on (after).
func (d Database) CompareSides(before, after *build.Inputs, pass time.Time) (*drift.Report, error) {
	d.Window = nil
	var best *drift.Report
	side, most := "", 0
	for _, s := range []struct {
		name string
		in   *build.Inputs
	}{{"after", after}, {"before", before}} {
		rep, err := d.Compare(s.in)
		if err != nil {
			return nil, err
		}
		if n := usageAgrees(rep); best == nil || n > most {
			best, side, most = rep, s.name, n
		}
	}
	best.Note = strings.Join(slices.DeleteFunc([]string{fmt.Sprintf("read as slurmctld ran its decay pass of %s: judged as read %s it, the side more associations' RawUsage agrees with",
		pass.UTC().Format(time.RFC3339), side), best.Note}, func(s string) bool { return s == "" }), "; ")
	return best, nil
}

// usageAgrees counts rep's associations whose RawUsage drifts no more
// than allowed without the job ends the database may not hold yet
// (PassError.Unrecorded): a whole period of them before a pass, against
// a moment after it, would let the side before the pass explain any
// report, though slurmdbd records an end the second it happens (in the
// recordings, 288 of 456 ended jobs' records last changed the second
// they ended; the others were re-sent after a restart or reconfigure).
func usageAgrees(rep *drift.Report) int {
	n := 0
	for _, e := range rep.Associations {
		if e.Drift == nil || e.Allowed == nil {
			continue
		}
		allowed := float64(e.Allowed.RawUsage)
		if e.BoundParts != nil {
			allowed -= e.BoundParts.Unrecorded
		}
		if math.Abs(float64(e.Drift.RawUsage)) <= allowed {
			n++
		}
	}
	return n
}

// Read is sshare.ReadAny with --algorithm's columns for output without a
// header.
func Read(r io.Reader, name, algorithm string) (*shares.Table, error) {
	out, err := sshare.ReadAny(r, name, Layout(algorithm))
	return out, NoHeader(name, err)
}

// Layout is --algorithm's columns of sshare text without a header (nil:
// auto, from the header).
func Layout(algorithm string) sshare.Layout {
	if algorithm == "auto" || algorithm == "" {
		return nil
	}
	fairTree := algorithm == string(fairshare.AlgorithmFairTree)
	return func(n int) ([]string, error) { return shares.ColumnsForCount(n, fairTree) }
}

// NoHeader says what to do about output without a header.
func NoHeader(name string, err error) error {
	if errors.Is(err, sshare.ErrNoHeader) {
		return fmt.Errorf("%s: --algorithm auto needs sshare's header line (without it, Fair Tree -l and classic -l -m output have the same number of columns): rerun sshare without -n or pass --algorithm", name)
	}
	return err
}

// Failure is what check --output json prints instead of a report when it
// cannot answer (slurmctld down, the database unreachable, bad input): a
// consumer parsing stdout reads one JSON document whatever the exit.
type Failure struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// WriteFailure prints err, which ends check with status code, as a Failure.
func WriteFailure(w io.Writer, err error, code int) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Failure{Error: err.Error(), ExitCode: code})
}

// Write prints one report as format (json or table) and tells whether
// it is free of drift.
func Write(w io.Writer, rep *drift.Report, format string) (ok bool, err error) {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(w)
	}
	return rep.OK(), err
}
