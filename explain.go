package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/explain"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sim"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
)

type explainCmd struct {
	User    string `help:"User to explain (or --job)."`
	Job     uint32 `help:"Pending job to explain: its priority factor by factor, next to its association's fairshare path."`
	Account string `help:"Only the user's association under this account (default: all of them)."`
	cli.ClusterFlag
	cli.OutputFlag
	cli.ReportedFlags
	cli.DemoFlags
	cli.AtFlag
	cli.SavedBoot
	cli.SlurmFlags
	cli.DBFlags
	cli.MauiFlags
	cli.ForecastFlags
}

// Validate checks what the flag groups (their own Validate, which kong
// calls) cannot.
func (c *explainCmd) Validate() error {
	if c.SlurmctldConfigFile != "" && c.At == "" {
		return errors.New("--slurmctld.config-file: a live run asks slurmctld; give it with --at, the moment it was saved at")
	}
	if err := c.ForecastFlags.Check(c.User, c.Job); err != nil {
		return err
	}
	return c.One()
}

func (c *explainCmd) Run(env *runEnv) error {
	ctx := context.Background()
	at, err := cli.ParseAt(c.At, time.Now())
	if err != nil {
		return err
	}
	whatIfMode := len(c.WhatIf) > 0
	if !whatIfMode && (c.User == "") == (c.Job == 0) {
		return fmt.Errorf("explain: expected --user or --job, one of them")
	}
	opts := []engine.Option{engine.WithLogger(cli.OneShot(env.log)), engine.WithTolerance(drift.DefaultTolerance),
		engine.WithMaui(c.Config(), c.MauiInterval), engine.WithWhatIf()}
	var conf *slurmconf.Config
	var name, dsn string
	var out *shares.Table
	if c.Demo {
		// serve --demo's cluster, as it stands at at
		cfg := c.Sim()
		cfg.Start = at
		sc, err := sim.New(cfg)
		if err != nil {
			return err
		}
		conf, name = sc.Conf(), sim.Name
		opts = append(opts, engine.WithSim(sc, 1), engine.WithBootTime(sc.Boot))
		if !whatIfMode {
			if out, err = sc.Report(ctx); err != nil {
				return err
			}
		}
	} else {
		set, err := cli.NewSetup(env.log, &c.DBFlags, &c.SlurmFlags)
		if err != nil {
			return err
		}
		conf, name, dsn = set.Conf, set.Cluster(c.Cluster), set.DSN
		if c.At == "" && name == conf.ClusterName && !whatIfMode {
			if out, err = c.Report(ctx, env.log, c.SlurmConf); err != nil {
				env.log.Warn().Err(err).Msg("what Slurm reports is unknown")
				out = nil
			}
		}
		opts = append(opts, engine.WithQueryTimeout(c.DBTimeout), engine.WithStateDir(set.StateDir))
		boot, err := cli.BootSource(out != nil, &c.ReportedTimeoutFlag, &c.SavedBoot, c.SlurmConf)
		if err != nil {
			return err
		}
		if boot != nil {
			opts = append(opts, engine.WithBootTime(boot))
		}
	}
	e := engine.New(conf, dsn, opts...)
	defer e.Close()
	in, err := e.Refresh(ctx, name, at)
	if err != nil {
		return err
	}
	if c.Forecast.On {
		if err := e.ForecastInputs(ctx, in, c.ForecastWindow); err != nil {
			return err
		}
	}
	if out != nil {
		in.Reported = &build.Reported{Out: out, At: at}
	}
	return c.explain(env, in, conf, at)
}

// explain answers for the cluster's inputs: what-if shares, a job or a
// user.
func (c *explainCmd) explain(env *runEnv, in *build.Inputs, conf *slurmconf.Config, at time.Time) error {
	if len(c.WhatIf) > 0 {
		changes, _ := c.ShareChanges() // checked by Validate
		x, err := explain.Shares(in, changes, c.WhatIf, c.User)
		if err != nil {
			return err
		}
		return explain.Write(env.stdout, c.Output, x)
	}
	in.Detail = true
	cl, err := build.Build(in)
	if err != nil {
		return err
	}
	_, phase := in.AtReport(nil)
	if c.Job != 0 {
		jobs, err := explain.Job(cl, conf, c.Job, at, phase)
		if err != nil {
			return err
		}
		return explain.Write(env.stdout, c.Output, jobs)
	}
	exps, err := explain.User(cl, at, c.User, c.Account, phase)
	if err != nil {
		return err
	}
	explain.UsageBounds(exps, in)
	if c.Forecast.On {
		for k := range exps {
			i := explain.TreeIndex(in.Tree, exps[k].Path[len(exps[k].Path)-1])
			if exps[k].Forecast, err = explain.Forecast(in, i, c.User, c.Forecast.Threshold, c.ForecastAt...); err != nil {
				return err
			}
		}
	}
	return explain.Write(env.stdout, c.Output, exps)
}
