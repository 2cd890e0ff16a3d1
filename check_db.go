package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
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
	at, window, err := parseAtWindow(c.At, time.Now())
	if err != nil {
		return err
	}
	set, err := setup(env.log, &c.DBFlags, &c.SlurmFlags)
	if err != nil {
		return err
	}
	conf := set.conf
	e := &engine.Exporter{DSN: set.dsn, QueryTimeout: c.DBTimeout, Conf: conf, StateDir: set.stateDir, Log: env.log}
	// slurmctld's boot time orders tied Fair Tree siblings as it does;
	// without it (sshare output from a file alone) ties allow their rank
	// range
	switch {
	case len(c.SshareFile) == 0:
		e.BootTime = c.bootTime(c.SlurmConf)
	case c.SlurmctldConfigFile != "":
		if e.BootTime, err = c.saved(); err != nil {
			return err
		}
	}
	reported, read, passRaw, gap, err := c.readAcrossPass(ctx, e, conf, set.stateDir)
	if err != nil {
		return err
	}
	if read == nil {
		read = window
	}
	if read != nil {
		at = read[0].Add(read[1].Sub(read[0]) / 2)
	}
	in, err := e.Once(ctx, set.cluster(c.Cluster), at)
	if err != nil {
		return err
	}
	var notes []string
	if in.Phase.Source == result.PhaseUnknown {
		notes = append(notes, "phase of the decay passes unknown (no readable priority_last_decay_ran): usage is judged against one PriorityCalcPeriod of decay and running jobs' charge")
	}
	alg := conf.Algorithm()
	if c.Algorithm != "auto" {
		alg = fairshare.Algorithm(c.Algorithm)
	}
	reported.FillMissingFactor(in.Settings.Dampening)
	pass := in.PassError(read)
	// the comparison serve makes, association by association: the
	// database against Slurm's usage, with Slurm's formula beside it
	cmp, err := drift.CompareReport(drift.Input{Algorithm: alg, Dampening: in.Settings.Dampening,
		Tolerance: drift.Tolerance{Formula: c.FormulaTolerance, Usage: c.UsageTolerance, Factor: c.FactorTolerance},
		Report:    reported, DB: in.Tree, TieOrderKnown: in.TieOrderKnown, Pass: pass, PassRaw: passRaw, PassGap: gap.Seconds(), InferLag: true}, true)
	if err != nil {
		return err
	}
	rep := cmp.Usage
	rep.Phase = &drift.Phase{Source: in.Phase.Source, Uncertainty: pass.Window}
	rep.Formula = cmp.Formula
	if alg == fairshare.AlgorithmDepthOblivious {
		notes = append(notes, depthObliviousNote)
	}
	rep.Note = strings.Join(notes, "; ")
	return writeReport(env, rep, c.Output)
}

// readAcrossPass reads what Slurm reports: from --sshare-file, or by
// running sshare, again and again across a decay pass when its moment is
// unknown (--phase.wait), which e then knows. read is when the returned
// report was read (nil: from a file, whose moment is --at); passRaw the
// usage of the read that showed the pass, where it differs
// (drift.Input.PassRaw), read up to gap after it.
func (c *checkCmd) readAcrossPass(ctx context.Context, e *engine.Exporter, conf *slurmconf.Config, stateDir string) (out *shares.Table, read *[2]time.Time, passRaw map[drift.Key]float64, gap time.Duration, err error) {
	if len(c.SshareFile) > 0 {
		name := c.SshareFile[0] // Validate: one
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		defer f.Close()
		out, err = parseSshare(f, name, c.Algorithm)
		return out, nil, nil, 0, err
	}
	wait, err := c.phaseWait(conf)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	if _, _, err := slurmstate.LastDecayRan(stateDir); err == nil {
		wait = 0 // the state file says when passes fall
	}
	tracker := &drift.PhaseTracker{Period: conf.PriorityCalcPeriod}
	deadline := time.Now().Add(wait)
	var first, pass, raw map[drift.Key]float64
	var prev *shares.Table
	var passes uint64
	var prevStart time.Time
	seen := false
	for {
		rctx, cancel := context.WithTimeout(ctx, c.ReportedTimeout)
		start := time.Now()
		out, err = sshare.Run(rctx, c.SlurmConf)
		end := time.Now()
		cancel()
		if err != nil {
			return nil, nil, nil, 0, err
		}
		read = &[2]time.Time{start, end}
		raw = drift.RawByKey(out)
		if prev != nil && drift.PassBetween(prev, out) {
			passes, pass, gap = passes+1, raw, end.Sub(prevStart)
		}
		prevStart = start
		if first == nil {
			first = raw
		}
		prev = out
		tracker.Observe(start, end, passes)
		if seen || !end.Before(deadline) {
			break
		}
		// one bracket, from reads a second apart, pins the pass to a few
		// seconds: the bisection serve does over several periods is not
		// worth a command's wait. The report is the read after, clear
		// of the pass (a read near it may show either side).
		if _, u, ok := tracker.Pass(end); ok && u < conf.PriorityCalcPeriod/4 {
			seen = true
			time.Sleep(1500*time.Millisecond + end.Sub(start))
			continue
		}
		time.Sleep(min(time.Second, time.Until(deadline)))
	}
	if wait > 0 {
		e.InferPhase(tracker)
		if pass == nil {
			// a pass fell while every association with usage ran a job
			// (none decreased): its values lie between the first read's
			// usage and the last's
			pass = first
		}
	}
	if maps.Equal(pass, raw) {
		pass = nil
	}
	return out, read, pass, gap, nil
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
