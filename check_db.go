package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/refresh"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// database are the flags of check's database mode, which a DSN turns on.
type database struct {
	dsnFlag
	slurmFlags
	reportedTimeout
	driftFlags
	atFlag
	Cluster string `help:"Cluster to check (default: slurm.conf's ClusterName)."`
}

func (d *database) enabled() bool { return d.DSNFile != "" || os.Getenv(dsnEnv) != "" }

func (d *database) validate() error {
	if err := d.dsnFlag.validate(); err != nil {
		return err
	}
	if err := d.driftFlags.validate(); err != nil {
		return err
	}
	return d.reportedTimeout.validate()
}

// runDatabase rebuilds usage and factors from the database and compares
// them with what sshare reports.
func (c *checkCmd) runDatabase(env *runEnv) error {
	ctx := context.Background()
	if c.At != "" && len(c.SshareFile) == 0 {
		return errors.New("--at: sshare reports the present; give --sshare-file taken at that moment")
	}
	at, err := parseAt(c.At, time.Now())
	if err != nil {
		return err
	}
	set, err := setup(env.log, &c.dsnFlag, &c.slurmFlags)
	if err != nil {
		return err
	}
	conf := set.conf
	e := &refresh.Exporter{DSN: set.dsn, QueryTimeout: c.DBTimeout, Conf: conf, StateDir: set.stateDir, Log: env.log}
	if len(c.SshareFile) == 0 {
		// slurmctld's boot time orders tied Fair Tree siblings as it
		// does; without it (sshare output from a file) ties allow their
		// rank range
		e.BootTime = c.bootTime(c.SlurmConf)
	}
	in, err := e.Once(ctx, set.cluster(c.Cluster), at)
	if err != nil {
		return err
	}
	var notes []string
	if !in.PhaseKnown {
		notes = append(notes, "phase of the decay passes unknown (no readable priority_last_decay_ran): usage may be off by one PriorityCalcPeriod")
	}
	alg := conf.Algorithm()
	if c.Algorithm != "auto" {
		alg = fairshare.Algorithm(c.Algorithm)
	}
	reported, err := c.reported(ctx, conf)
	if err != nil {
		return err
	}
	reported.FillMissingFactor(in.Settings.Dampening)
	// the comparison serve makes, association by association: the
	// database against Slurm's usage, with Slurm's formula beside it
	cmp, err := drift.CompareReport(drift.Input{Algorithm: alg, Dampening: in.Settings.Dampening,
		Tolerance: drift.Tolerance{Formula: c.Tolerance, Usage: c.UsageTolerance, Factor: c.FactorTolerance},
		Report:    reported, DB: in.Tree, TieOrderKnown: in.TieOrderKnown}, true)
	if err != nil {
		return err
	}
	rep := cmp.Usage
	rep.Formula = cmp.Formula
	if alg == fairshare.AlgorithmDepthOblivious {
		notes = append(notes, depthObliviousNote)
	}
	rep.Note = strings.Join(notes, "; ")
	return writeReport(env, rep, c.Output)
}

func (c *checkCmd) reported(ctx context.Context, conf *slurmconf.Config) (*sshare.Output, error) {
	if len(c.SshareFile) > 0 {
		name := c.SshareFile[0] // Validate: one
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return parseSshare(f, name, c.Algorithm)
	}
	ctx, cancel := context.WithTimeout(ctx, c.ReportedTimeout)
	defer cancel()
	return sshare.Run(ctx, c.SlurmConf)
}
