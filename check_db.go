package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/check"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// runDatabase rebuilds usage and factors from the database and compares
// them with what sshare reports.
func (c *checkCmd) runDatabase(env *runEnv) error {
	ctx := context.Background()
	if c.At != "" && len(c.SshareFile) == 0 {
		return errors.New("--at: sshare reports the present; give --sshare-file taken at that moment")
	}
	if c.SlurmctldConfigFile != "" && len(c.SshareFile) == 0 {
		return errors.New("--slurmctld.config-file: a live run asks slurmctld; give it with the --sshare-file it was saved with")
	}
	at, window, err := cli.ParseAtWindow(c.At, time.Now())
	if err != nil {
		return err
	}
	set, err := cli.NewSetup(env.log, &c.DBFlags, &c.SlurmFlags)
	if err != nil {
		return err
	}
	conf := set.Conf
	opts := []engine.Option{engine.WithLogger(cli.OneShot(env.log)), engine.WithQueryTimeout(c.DBTimeout), engine.WithStateDir(set.StateDir)}
	boot, err := cli.BootSource(len(c.SshareFile) == 0, &c.ReportedTimeoutFlag, &c.SavedBoot, c.SlurmConf)
	if err != nil {
		return err
	}
	reported, r, err := c.readReported(ctx, set, boot)
	if err != nil {
		return err
	}
	switch {
	case r != nil:
		// the tracker asked it, once
		opts = append(opts, engine.WithBootTime(func(context.Context) (time.Time, error) { return r.Boot, r.BootErr }))
	case boot != nil:
		opts = append(opts, engine.WithBootTime(boot))
	}
	d := check.Database{Reported: reported, Algorithm: check.Pick(c.Algorithm, conf.Algorithm()),
		Tolerance: drift.Tolerance{Formula: c.FormulaTolerance, Usage: c.UsageTolerance, Factor: c.FactorTolerance}}
	if r != nil {
		// read live: the tracker that read it knows the phase
		opts = append(opts, engine.WithTracker(r.tracker))
		window = &[2]time.Time{r.Start, r.End}
		d.PassRaw, d.PassGap, d.Losses, d.Settling = r.PassRaw(0), r.PassGap, r.Losses, r.Settling
	}
	if window != nil {
		at = window[0].Add(window[1].Sub(window[0]) / 2)
	}
	d.Window = window
	e := engine.New(conf, set.DSN, opts...)
	defer e.Close()
	if r != nil {
		e.WaitRecorded(ctx, r.End)
	}
	readAt := time.Now()
	in, err := e.Refresh(ctx, set.Cluster(c.Cluster), at)
	if err != nil {
		return err
	}
	if in.ReadAt, err = c.databaseReadAt(r, readAt); err != nil {
		return err
	}
	if n, ok := in.SincePass(window); ok && d.PassRaw == nil {
		// the values slurmctld computed at its last pass, against the
		// usage they were computed from: the database just after it
		at, err := e.Refresh(ctx, set.Cluster(c.Cluster), n.After())
		if err != nil {
			return err
		}
		d.PassRaw, d.PassGap = drift.RawOfTree(at.Tree), n.Clear
	}
	rep, err := d.Compare(in)
	if n, near := in.NearPass(window); near && err == nil && d.PassRaw == nil {
		rep, err = c.compareSides(ctx, e, set.Cluster(c.Cluster), d, in, n)
	}
	if err != nil {
		return err
	}
	return driftExit(check.Write(env.stdout, rep, c.Output))
}

// databaseReadAt is when the database was read: readAt for a live one
// (r, the report read live); a dump replayed with --at holds what it held
// when it was dumped, which --database-at tells (zero: not known).
func (c *checkCmd) databaseReadAt(r *liveRead, readAt time.Time) (time.Time, error) {
	switch {
	case r != nil:
		return readAt, nil
	case c.DatabaseAt != "":
		t, err := cli.ParseAt(c.DatabaseAt, time.Now())
		if err != nil {
			return time.Time{}, fmt.Errorf("--database-at: %w", err)
		}
		return t, nil
	}
	return time.Time{}, nil
}

// compareSides judges a report read as slurmctld ran a pass (n) against
// the database on either side of it (check.Database.CompareSides): in is
// the database at the read.
func (c *checkCmd) compareSides(ctx context.Context, e *engine.Engine, cluster string, d check.Database, in *build.Inputs, n build.Near) (*drift.Report, error) {
	before, err := e.Refresh(ctx, cluster, n.Before())
	if err != nil {
		return nil, err
	}
	after := in
	if !in.Computed.After(n.After()) {
		if after, err = e.Refresh(ctx, cluster, n.After()); err != nil {
			return nil, err
		}
	}
	return d.CompareSides(before, after, n.Pass)
}

// liveRead is sshare read live, with the tracker that read it.
type liveRead struct {
	*engine.Reading
	tracker *engine.Tracker
}

// readReported reads what Slurm reports: from --sshare-file (r nil: its
// moment is --at), or by running sshare, across a decay pass when its
// moment is unknown (--phase.wait), where slurmctld's boot (boot) says
// when passes fall.
func (c *checkCmd) readReported(ctx context.Context, set *cli.Setup, boot func(context.Context) (time.Time, error)) (out *shares.Table, r *liveRead, err error) {
	conf := set.Conf
	if len(c.SshareFile) > 0 {
		name := c.SshareFile[0] // Validate: one
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		out, err = check.Read(f, name, c.Algorithm)
		return out, nil, err
	}
	wait, err := c.phaseWait(conf)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := slurmstate.LastDecayRan(set.StateDir); err == nil {
		wait = 0 // the state file says when passes fall
	}
	t := engine.NewTracker(engine.TrackerConfig{Read: func(ctx context.Context) (*shares.Table, error) { return sshare.Run(ctx, c.SlurmConf) },
		BootTime: boot, Process: set.Ctld, Timeout: c.ReportedTimeout, Period: conf.PriorityCalcPeriod, Interval: conf.PriorityCalcPeriod / 3})
	t.SetConf(conf)
	read, err := t.ReadAcrossPass(ctx, wait)
	if err != nil {
		return nil, nil, err
	}
	return read.Out, &liveRead{read, t}, nil
}

// phaseWait is --phase.wait for conf.
func (c *checkCmd) phaseWait(conf *slurmconf.Config) (time.Duration, error) {
	if c.PhaseWait == "auto" {
		return conf.PriorityCalcPeriod + 10*time.Second, nil
	}
	d, err := time.ParseDuration(c.PhaseWait)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--phase.wait %q: expected auto or a duration >= 0", c.PhaseWait)
	}
	return d, nil
}
