package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/passes"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// ErrNoSnapshot is Finish's error when no snapshot was added.
var ErrNoSnapshot = errors.New("no snapshot to check (every one empty)")

// Series checks replay mode's snapshots in time order, each with the last
// earlier one whose RawUsage differs as its lag reference (serve's rule,
// engine.Reading.Follow: usage changes only at slurmctld's decay
// passes, so that one was taken before the last pass). It prints as it
// goes: a listing of sshare.MaxBytes every 30 s for a day is 180 GB. One
// snapshot alone prints as check always printed one report.
type Series struct {
	w      io.Writer
	format string
	replay Replay
	period time.Duration
	n      int
	// first is held until a second snapshot comes.
	first *snapshot
	// last is the latest snapshot, with its references for the next
	last     *engine.Reading
	lastAt   time.Time
	rows     []seriesRow
	drifting []int
}

// NewSeries prints to w as format (json or table). period is slurm.conf's
// PriorityCalcPeriod: an earlier snapshot is a later one's lag reference
// only if taken at most 3 periods before it (0: whatever the times).
func NewSeries(w io.Writer, format string, replay Replay, period time.Duration) *Series {
	return &Series{w: w, format: format, replay: replay, period: period}
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

// Add checks one snapshot (not Empty) and prints it.
func (s *Series) Add(in sshare.Snapshot) error {
	snap := snapshot{File: in.File, Line: in.Line}
	if at := in.At; !at.IsZero() {
		snap.Time = &at
		if !s.lastAt.IsZero() && at.Before(s.lastAt) {
			return fmt.Errorf("%s line %d: snapshot taken at %s, before the one before it (%s): expected snapshots in time order",
				snap.File, snap.Line, at.Format(time.RFC3339), s.lastAt.Format(time.RFC3339))
		}
		s.lastAt = at
	}
	s.n++
	snap.Index = s.n
	r := s.follow(in)
	var prevRaw map[result.AssocKey]float64
	if ref := r.LagReference(s.period); ref != nil {
		prevRaw, snap.LagReference = ref.Raw, &ref.ID
	}
	name := snap.File
	if snap.Line > 0 {
		name = fmt.Sprintf("%s, snapshot at line %d", snap.File, snap.Line)
	}
	rep, err := s.replay.Compare(in.Table, prevRaw, r.PassRaw(s.period), name)
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

// follow makes the next snapshot a reading after the last, with serve's
// references (engine.Reading.Follow): the last earlier snapshot whose
// RawUsage differs (the lag reference, LagReference) and the first after
// the last decay pass seen (PassRaw), which the values slurmctld computes
// at a pass were computed from: under AccountingStorageEnforce=limits a
// job's end raises RawUsage between passes and leaves them. A pass is seen
// as under limits (passes.Between): a series says nothing of
// slurm.conf, and without limits a pass shows there too (usage decays);
// one missed leaves an older reference, which only loosens the bound.
func (s *Series) follow(in sshare.Snapshot) *engine.Reading {
	r := &engine.Reading{ID: s.n, At: in.At, Out: in.Table, Raw: drift.RawByKey(in.Table)}
	r.Pass = s.last != nil && passes.Between(s.last.Out, in.Table, true)
	r.Follow(s.last)
	s.last = r
	return r
}

func (s *Series) open() error {
	if s.format == "json" {
		_, err := io.WriteString(s.w, "{\n  \"snapshots\": [\n")
		return err
	}
	return nil
}

// write prints one snapshot of a series of more than one.
func (s *Series) write(snap *snapshot) error {
	w := s.w
	if s.format == "json" {
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

// Finish prints the summary (one snapshot: its report alone) and tells
// whether no snapshot drifts; none added is ErrNoSnapshot.
func (s *Series) Finish() (ok bool, err error) {
	switch {
	case s.n == 0:
		return false, ErrNoSnapshot
	case s.first != nil:
		return Write(s.w, s.first.Report, s.format)
	}
	if s.format == "json" {
		drifting, _ := json.Marshal(append([]int{}, s.drifting...))
		_, err = fmt.Fprintf(s.w, "\n  ],\n  \"ok\": %v,\n  \"drifting\": %s\n}\n", len(s.drifting) == 0, drifting)
	} else {
		err = s.summary(s.w)
	}
	return len(s.drifting) == 0, err
}

// summary is a line per snapshot: time, counts, lag reference.
func (s *Series) summary(w io.Writer) error {
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
