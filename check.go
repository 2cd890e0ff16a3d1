package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/check"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

type checkCmd struct {
	SshareFile []string `name:"sshare-file" type:"existingfile" sep:"none" help:"Output of 'sshare -a -l -P' (with or without -m, -n), of 'sshare --json -a' or a slurmrestd /slurm/v0.0.N/shares body (v0.0.40 on; JSON is told by its first non-blank byte, '{'). Alone: replay mode, the tree, shares and raw usage come from it and every other column is recomputed and compared. Replay mode takes a series too: the flag repeated, in time order, and files of several snapshots each headed by a line '## <unix seconds>'; each snapshot is checked with the one before it as the reference of classic's one-pass lag. With --dsn-file or $SLURMDBD_EXPORTER_DSN: the reported side of database mode (once)."`
	Algorithm  string   `default:"auto" enum:"auto,classic,fair_tree,depth_oblivious" help:"Algorithm to recompute with: auto (replay: from the header, a LevelFS column means Fair Tree; database: from slurm.conf's PriorityFlags), classic, fair_tree or depth_oblivious."`
	Dampening  float64  `name:"dampening-factor" default:"1" help:"FairShareDampeningFactor of the classic algorithm (replay mode; database mode reads slurm.conf)."`
	cli.OutputFlag
	// serve takes it from slurm.conf (serve.Loop.freshReport)
	CalcPeriod time.Duration `name:"priority-calc-period" default:"5m" help:"Replay of a series: slurm.conf's PriorityCalcPeriod. An earlier snapshot is a later one's lag reference only if taken at most 3 periods before it, when '## <unix seconds>' lines give both times; 0: whatever the times."`

	// database mode, which a DSN turns on
	cli.DBFlags
	cli.SlurmFlags
	cli.ReportedTimeoutFlag
	cli.DriftFlags
	cli.AtFlag
	DatabaseAt string `name:"database-at" placeholder:"TIME" help:"With --at and a database dumped after the --sshare-file was read: when it was dumped (unix seconds or RFC 3339). Dumped 3 s or more after the read, it holds every job end slurmctld had charged by then, and no part of the bound is left for ends it may lack; otherwise, or without this, one is."`
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
	if c.DatabaseAt != "" && c.At == "" {
		return fmt.Errorf("--database-at %q: a live database is read now; expected it with --at", c.DatabaseAt)
	}
	if len(c.SshareFile) > 1 && c.Given() {
		return fmt.Errorf("--sshare-file given %d times: database mode compares one report with the database (a series is replay mode's)", len(c.SshareFile))
	}
	return c.One()
}

// Run prints the report, or with --output json, when check cannot answer,
// a check.Failure in its place.
func (c *checkCmd) Run(env *runEnv) error {
	if c.Output != "json" {
		return c.run(env)
	}
	// held until the end: a series prints snapshot by snapshot, and an
	// error after some would leave half a document on stdout
	var buf bytes.Buffer
	held := *env
	held.stdout = &buf
	err := c.run(&held)
	var ec exitCode
	if err != nil && !errors.As(err, &ec) {
		writeFailure(env.stdout, err)
		return err
	}
	if _, werr := env.stdout.Write(buf.Bytes()); werr != nil && err == nil {
		return werr
	}
	return err
}

func (c *checkCmd) run(env *runEnv) error {
	if c.Given() {
		return c.runDatabase(env)
	}
	s := check.NewSeries(env.stdout, c.Output, check.Replay{Algorithm: c.Algorithm, Dampening: c.Dampening, Tolerance: c.FormulaTolerance}, c.CalcPeriod)
	for _, name := range c.SshareFile {
		for snap, err := range sshare.Series(name, check.Layout(c.Algorithm)) {
			if err != nil {
				return check.NoHeader(snap.Label, err)
			}
			if snap.Empty {
				env.log.Warn().Str("file", name).Int("line", snap.Line).Int64("time", snap.At.Unix()).Msg("empty snapshot (did sshare fail?): skipped")
				continue
			}
			if err := s.Add(snap); err != nil {
				return err
			}
		}
	}
	ok, err := s.Finish()
	if errors.Is(err, check.ErrNoSnapshot) {
		return fmt.Errorf("%s: %w", strings.Join(c.SshareFile, ", "), err)
	}
	return driftExit(ok, err)
}

// driftExit turns drift into exit status 1.
func driftExit(ok bool, err error) error {
	if err == nil && !ok {
		return exitCode(exitDrift)
	}
	return err
}
