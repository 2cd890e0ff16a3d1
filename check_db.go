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
	if err := d.driftFlags.validate(); err != nil {
		return err
	}
	return d.reportedTimeout.validate()
}

// runDatabase rebuilds usage and factors from the database and compares
// them with what sshare reports.
func (c *checkCmd) runDatabase(env *runEnv) error {
	ctx := context.Background()
	if c.At != "" && c.SshareFile == "" {
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
	if c.SshareFile == "" {
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
	tree := in.Tree
	alg := conf.Algorithm()
	if c.Algorithm != "auto" {
		alg = fairshare.Algorithm(c.Algorithm)
	}
	vals, err := tree.Compute(alg, in.Settings.Dampening)
	if err != nil {
		return err
	}
	reported, err := c.reported(ctx, conf)
	if err != nil {
		return err
	}
	bounds := relativeBounds(vals, tree.Users(), in.TieOrderKnown, c.UsageTolerance, c.FactorTolerance)
	rep := drift.Compare(alg, c.Tolerance, drift.FromSshare(reported), drift.FromTree(tree, vals, bounds))
	if alg == fairshare.AlgorithmDepthOblivious {
		notes = append(notes, depthObliviousNote)
	}
	rep.Note = strings.Join(notes, "; ")
	return writeReport(env, rep, c.Output)
}

func (c *checkCmd) reported(ctx context.Context, conf *slurmconf.Config) (*sshare.Output, error) {
	if c.SshareFile != "" {
		f, err := os.Open(c.SshareFile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return parseSshare(f, c.SshareFile, c.Algorithm)
	}
	ctx, cancel := context.WithTimeout(ctx, c.ReportedTimeout)
	defer cancel()
	return sshare.Run(ctx, c.SlurmConf)
}

// relativeBounds is what database mode allows on top of the absolute
// tolerance: usage within usageTol relative, ratios of two usages twice
// that, and FairShare within factorTol, widened to the rank range of tied
// sibling accounts under Fair Tree unless their order is known: slurmctld
// walks them in an order only its boot time tells.
func relativeBounds(vals []fairshare.Values, users int, tieOrderKnown bool, usageTol, factorTol float64) []fairshare.Values {
	b := make([]fairshare.Values, len(vals))
	for i, v := range vals {
		spread := 0.0
		if !tieOrderKnown {
			spread = v.RankSpread(users)
		}
		b[i] = fairshare.Values{
			RawUsage:       usageTol * v.RawUsage,
			NormUsage:      2 * usageTol * v.NormUsage,
			EffectiveUsage: 2 * usageTol * v.EffectiveUsage,
			LevelFS:        2 * usageTol * v.LevelFS,
			FairShare:      max(factorTol, spread),
		}
	}
	return b
}
