package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

type checkCmd struct {
	SshareFile []string `name:"sshare-file" type:"existingfile" sep:"none" help:"Output of 'sshare -a -l -P' (with or without -m, -n), of 'sshare --json -a' or a slurmrestd /slurm/v0.0.N/shares body (v0.0.40 on; JSON is told by its first non-blank byte, '{'). Alone: replay mode, the tree, shares and raw usage come from it and every other column is recomputed and compared. Replay mode takes a series too: the flag repeated, in time order, and files of several snapshots each headed by a line '## <unix seconds>'; each snapshot is checked with the one before it as the reference of classic's one-pass lag. With --dsn-file or $SLURMDBD_EXPORTER_DSN: the reported side of database mode (once)."`
	Algorithm  string   `default:"auto" enum:"auto,classic,fair_tree,depth_oblivious" help:"Algorithm to recompute with: auto (replay: from the header, a LevelFS column means Fair Tree; database: from slurm.conf's PriorityFlags), classic, fair_tree or depth_oblivious."`
	Dampening  float64  `name:"dampening-factor" default:"1" help:"FairShareDampeningFactor of the classic algorithm (replay mode; database mode reads slurm.conf)."`
	cli.OutputFlag
	// serve takes it from slurm.conf (engine.Loop.freshReport)
	CalcPeriod time.Duration `name:"priority-calc-period" default:"5m" help:"Replay of a series: slurm.conf's PriorityCalcPeriod. An earlier snapshot is a later one's lag reference only if taken at most 3 periods before it, when '## <unix seconds>' lines give both times; 0: whatever the times."`

	// database mode, which a DSN turns on
	cli.DBFlags
	cli.SlurmFlags
	cli.ReportedTimeoutFlag
	cli.DriftFlags
	cli.AtFlag
	cli.ClusterFlag
	cli.SavedBoot
	// PhaseWait: without a readable priority_last_decay_ran, check reads
	// sshare until two reads bracket a decay pass (PriorityCalcPeriod at
	// most), so that usage is judged against a few seconds of charge
	// rather than a whole period's.
	PhaseWait string `name:"phase.wait" default:"auto" help:"Without a readable StateSaveLocation, how long to keep reading sshare to bracket slurmctld's decay pass: auto (one PriorityCalcPeriod and 10 s), a duration, or 0 (judge usage against the whole period)."`
}

// Validate checks what the flag groups (their own Validate, which kong
// calls) cannot.
func (c *checkCmd) Validate() error {
	if c.Dampening < 1 {
		return fmt.Errorf("--dampening-factor %v: expected a number >= 1 (FairShareDampeningFactor)", c.Dampening)
	}
	if c.CalcPeriod < 0 {
		return fmt.Errorf("--priority-calc-period %v: expected a duration >= 0", c.CalcPeriod)
	}
	if len(c.SshareFile) == 0 && !c.Given() {
		return fmt.Errorf("nothing to check: expected --sshare-file (replay mode) or --dsn-file / $SLURMDBD_EXPORTER_DSN (database mode)")
	}
	if len(c.SshareFile) > 1 && c.Given() {
		return fmt.Errorf("--sshare-file given %d times: database mode compares one report with the database (a series is replay mode's)", len(c.SshareFile))
	}
	return c.One()
}

const depthObliviousNote = "depth_oblivious is best effort: slurmctld sums siblings' normalized usage that it computes lazily, mixing values from different moments"

func (c *checkCmd) Run(env *runEnv) error {
	if c.Given() {
		return c.runDatabase(env)
	}
	s := &series{c: c, env: env}
	for _, name := range c.SshareFile {
		if err := s.readFile(name); err != nil {
			return err
		}
	}
	return s.finish()
}

// replay compares one report with its replay. prevRaw is RawUsage from
// the report taken before slurmctld's last decay pass (nil: none; then
// the one-pass lag is inferred from the report itself, drift.Input's
// InferLag).
func (c *checkCmd) replay(out *shares.Table, prevRaw map[drift.Key]float64, name string) (*drift.Report, error) {
	out.FillMissingFactor(c.Dampening)
	alg := fairshare.Algorithm(c.Algorithm)
	if c.Algorithm == "auto" {
		alg = fairshare.AlgorithmClassic
		if out.Has(shares.LevelFS) {
			alg = fairshare.AlgorithmFairTree
		}
	}
	cmp, err := drift.CompareReport(drift.Input{Algorithm: alg, Dampening: c.Dampening, Tolerance: drift.Tolerance{Formula: c.FormulaTolerance}, Report: out,
		PrevRaw: prevRaw, InferLag: prevRaw == nil}, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rep := cmp.Formula
	var notes []string
	if cmp.Lag != "" {
		notes = append(notes, cmp.Lag)
	}
	if alg == fairshare.AlgorithmDepthOblivious {
		notes = append(notes, depthObliviousNote)
	}
	rep.Note = strings.Join(notes, "; ")
	return rep, nil
}

// parseSshare is sshare.ReadAny with --algorithm's columns for output
// without a header.
func parseSshare(r io.Reader, name, algorithm string) (*shares.Table, error) {
	out, err := sshare.ReadAny(r, name, layout(algorithm))
	return out, noHeader(name, err)
}

// layout is --algorithm's columns of sshare text without a header (nil:
// auto, from the header).
func layout(algorithm string) sshare.Layout {
	if algorithm == "auto" {
		return nil
	}
	fairTree := algorithm == string(fairshare.AlgorithmFairTree)
	return func(n int) ([]string, error) { return shares.ColumnsForCount(n, fairTree) }
}

// noHeader says what to do about output without a header.
func noHeader(name string, err error) error {
	if errors.Is(err, sshare.ErrNoHeader) {
		return fmt.Errorf("%s: --algorithm auto needs sshare's header line (without it, Fair Tree -l and classic -l -m output have the same number of columns): rerun sshare without -n or pass --algorithm", name)
	}
	return err
}

// writeReport prints the report and turns drift into exit status 1.
func writeReport(env *runEnv, rep *drift.Report, format string) error {
	var err error
	if format == "json" {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(env.stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return exitCode(exitDrift)
	}
	return nil
}

// series checks replay mode's snapshots in time order, each with the last
// earlier one whose RawUsage differs as its lag reference (serve's rule,
// engine.Reading.Follow: usage changes only at slurmctld's decay
// passes, so that one was taken before the last pass). It prints as it
// goes: a listing of sshare.MaxBytes every 30 s for a day is 180 GB. One
// snapshot alone prints as check always printed one report.
type series struct {
	c   *checkCmd
	env *runEnv
	n   int
	// first is held until a second snapshot comes.
	first *snapshot
	// last is the latest snapshot, with its references for the next
	last     *engine.Reading
	lastAt   time.Time
	rows     []seriesRow
	drifting []int
}

// snapshot is one report of a series, as its JSON shows it.
type snapshot struct {
	Index int    `json:"index"` // 1-based, in the series
	File  string `json:"file"`
	// Line is that of its '## <unix seconds>' line; 0: the whole file.
	Line int        `json:"line,omitempty"`
	Time *time.Time `json:"time"` // null: unknown
	// LagReference is the index of the snapshot whose RawUsage stood for
	// the usage before slurmctld's last decay pass; null: none (a classic
	// report's lag is then inferred from the report itself).
	LagReference *int `json:"lag_reference"`
	OK           bool `json:"ok"`
	*drift.Report
}

// seriesRow is a snapshot's line in the closing summary.
type seriesRow struct {
	snap   snapshot // without its report
	counts map[drift.Status]int
	notYet int
}

// readFile reads one --sshare-file: one listing, or snapshots each
// headed by a '## <unix seconds>' line.
func (s *series) readFile(name string) error {
	for snap, err := range sshare.Series(name, layout(s.c.Algorithm)) {
		if err != nil {
			return noHeader(snap.Label, err)
		}
		if snap.Empty {
			s.env.log.Warn().Str("file", name).Int("line", snap.Line).Int64("time", snap.At.Unix()).Msg("empty snapshot (did sshare fail?): skipped")
			continue
		}
		one := snapshot{File: snap.File, Line: snap.Line}
		if at := snap.At; !at.IsZero() {
			one.Time = &at
		}
		if err := s.add(one, snap.Table); err != nil {
			return err
		}
	}
	return nil
}

// add checks one snapshot and prints it.
func (s *series) add(snap snapshot, out *shares.Table) error {
	var at time.Time
	if snap.Time != nil {
		at = *snap.Time
		if !s.lastAt.IsZero() && at.Before(s.lastAt) {
			return fmt.Errorf("%s line %d: snapshot taken at %s, before the one before it (%s): expected snapshots in time order",
				snap.File, snap.Line, at.Format(time.RFC3339), s.lastAt.Format(time.RFC3339))
		}
		s.lastAt = at
	}
	s.n++
	snap.Index = s.n
	prevRaw, ref := s.lagReference(at, drift.RawByKey(out))
	snap.LagReference = ref
	name := snap.File
	if snap.Line > 0 {
		name = fmt.Sprintf("%s, snapshot at line %d", snap.File, snap.Line)
	}
	rep, err := s.c.replay(out, prevRaw, name)
	if err != nil {
		return err
	}
	snap.Report, snap.OK = rep, rep.OK()
	if !snap.OK {
		s.drifting = append(s.drifting, snap.Index)
	}
	row := seriesRow{snap: snap, counts: rep.Summary.Counts, notYet: rep.Summary.NotYetComputed}
	row.snap.Report = nil
	s.rows = append(s.rows, row)
	if s.n == 1 {
		s.first = &snap
		return nil
	}
	if s.first != nil {
		if err := s.open(); err != nil {
			return err
		}
		if err := s.write(s.first); err != nil {
			return err
		}
		s.first = nil
	}
	return s.write(&snap)
}

// lagReference takes the next snapshot's RawUsage (taken at at; zero:
// unknown) and returns its lag reference as serve takes a report's
// (engine.Reading.LagReference): the RawUsage of the last earlier
// snapshot whose RawUsage differs, and that snapshot's index, if taken at
// most 3 --priority-calc-period before (nil: none).
func (s *series) lagReference(at time.Time, raw map[drift.Key]float64) (map[drift.Key]float64, *int) {
	r := &engine.Reading{ID: s.n, At: at, Raw: raw}
	r.Follow(s.last)
	s.last = r
	if ref := r.LagReference(s.c.CalcPeriod); ref != nil {
		return ref.Raw, &ref.ID
	}
	return nil, nil
}

func (s *series) open() error {
	if s.c.Output == "json" {
		_, err := io.WriteString(s.env.stdout, "{\n  \"snapshots\": [\n")
		return err
	}
	return nil
}

// write prints one snapshot of a series of more than one.
func (s *series) write(snap *snapshot) error {
	w := s.env.stdout
	if s.c.Output == "json" {
		b, err := json.MarshalIndent(snap, "    ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n"
		if snap.Index == 1 {
			sep = ""
		}
		_, err = fmt.Fprintf(w, "%s    %s", sep, b)
		return err
	}
	fmt.Fprintf(w, "== snapshot %d: %s\n", snap.Index, describe(snap))
	if err := snap.Report.WriteTable(w); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// describe says where a snapshot comes from, when it was taken and its
// lag reference.
func describe(snap *snapshot) string {
	where := snap.File
	if snap.Line > 0 {
		where += fmt.Sprintf(" line %d", snap.Line)
	}
	if snap.Time != nil {
		where += ", " + snap.Time.Format(time.RFC3339)
	}
	return where + ", lag reference: " + lagReference(snap)
}

func lagReference(snap *snapshot) string {
	if snap.LagReference == nil {
		return "none"
	}
	return fmt.Sprintf("snapshot %d", *snap.LagReference)
}

// finish prints the summary (one snapshot: its report alone) and turns
// drift into exit status 1.
func (s *series) finish() error {
	switch {
	case s.n == 0:
		return fmt.Errorf("%s: no snapshot to check (every one empty)", strings.Join(s.c.SshareFile, ", "))
	case s.first != nil:
		return writeReport(s.env, s.first.Report, s.c.Output)
	}
	w := s.env.stdout
	var err error
	if s.c.Output == "json" {
		drifting, _ := json.Marshal(append([]int{}, s.drifting...))
		_, err = fmt.Fprintf(w, "\n  ],\n  \"ok\": %v,\n  \"drifting\": %s\n}\n", len(s.drifting) == 0, drifting)
	} else {
		err = s.summary(w)
	}
	if err != nil {
		return err
	}
	if len(s.drifting) > 0 {
		return exitCode(exitDrift)
	}
	return nil
}

// summary is a line per snapshot: time, counts, lag reference.
func (s *series) summary(w io.Writer) error {
	fmt.Fprintf(w, "series: %d snapshots, %d drifting\n", s.n, len(s.drifting))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "SNAPSHOT\tTIME\tFILE\tRESULT")
	for _, st := range drift.Statuses {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(st)))
	}
	fmt.Fprint(tw, "\tNOT_YET_COMPUTED\tLAG REFERENCE\n")
	for i := range s.rows {
		r := &s.rows[i]
		at, where, result := "-", r.snap.File, "ok"
		if r.snap.Time != nil {
			at = r.snap.Time.Format(time.RFC3339)
		}
		if r.snap.Line > 0 {
			where += fmt.Sprintf(":%d", r.snap.Line)
		}
		if !r.snap.OK {
			result = "drift"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s", r.snap.Index, at, where, result)
		for _, st := range drift.Statuses {
			fmt.Fprintf(tw, "\t%d", r.counts[st])
		}
		fmt.Fprintf(tw, "\t%d\t%s\n", r.notYet, lagReference(&r.snap))
	}
	return tw.Flush()
}
