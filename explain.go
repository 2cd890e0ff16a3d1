package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/alecthomas/kong"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/explain"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
)

type explainCmd struct {
	User    string `help:"User to explain (or --job)."`
	Job     uint32 `help:"Pending job to explain: its priority factor by factor, next to its association's fairshare path."`
	Account string `help:"Only the user's association under this account (default: all of them)."`
	ClusterFlag
	OutputFlag
	ReportedFlags
	DemoFlags
	AtFlag
	SavedBoot
	SlurmFlags
	DBFlags
	MauiFlags
	ForecastFlags
}

// Validate checks what the flag groups (their own Validate, which kong
// calls) cannot.
func (c *explainCmd) Validate() error {
	if c.SlurmctldConfigFile != "" && c.At == "" {
		return errors.New("--slurmctld.config-file: a live run asks slurmctld; give it with --at, the moment it was saved at")
	}
	if err := c.ForecastFlags.validate(c.User, c.Job); err != nil {
		return err
	}
	return c.one()
}

func (c *explainCmd) Run(env *runEnv) error {
	ctx := context.Background()
	at, err := parseAt(c.At, time.Now())
	if err != nil {
		return err
	}
	whatIfMode := len(c.WhatIf) > 0
	if !whatIfMode && (c.User == "") == (c.Job == 0) {
		return fmt.Errorf("explain: expected --user or --job, one of them")
	}
	if c.Demo {
		demo := &slurmconf.Config{ClusterName: "demo", PriorityType: "priority/multifactor", PriorityCalcPeriod: 5 * time.Minute}
		return c.explain(env, engine.DemoExplained(at, c.DemoAssociations), demo, at)
	}
	set, err := setup(env.log, &c.DBFlags, &c.SlurmFlags)
	if err != nil {
		return err
	}
	conf, name := set.conf, set.cluster(c.Cluster)
	var out *shares.Table
	if c.At == "" && name == conf.ClusterName && !whatIfMode {
		if out, err = c.report(ctx, env.log, c.SlurmConf); err != nil {
			env.log.Warn().Err(err).Msg("what Slurm reports is unknown")
			out = nil
		}
	}
	opts := []engine.Option{engine.WithLogger(oneShot(env.log)), engine.WithQueryTimeout(c.DBTimeout), engine.WithStateDir(set.stateDir),
		engine.WithTolerance(drift.DefaultTolerance), engine.WithMaui(c.config(), c.MauiInterval), engine.WithWhatIf()}
	switch {
	case out != nil:
		opts = append(opts, engine.WithBootTime(c.bootTime(c.SlurmConf)))
	case c.SlurmctldConfigFile != "":
		boot, err := c.saved()
		if err != nil {
			return err
		}
		opts = append(opts, engine.WithBootTime(boot))
	}
	e := engine.New(conf, set.dsn, opts...)
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
		in.Report = &engine.Report{Out: out, At: at}
	}
	return c.explain(env, in, conf, at)
}

// explain answers for the cluster's inputs: what-if shares, a job or a
// user.
func (c *explainCmd) explain(env *runEnv, in *engine.Inputs, conf *slurmconf.Config, at time.Time) error {
	if len(c.WhatIf) > 0 {
		changes, _ := c.shareChanges() // checked by Validate
		x, err := explain.Shares(in, changes, c.WhatIf, c.User)
		if err != nil {
			return err
		}
		return explain.Write(env.stdout, c.Output, x)
	}
	in.Detail = true
	cl, err := engine.Build(in)
	if err != nil {
		return err
	}
	phase := in.Phase
	phase.Uncertainty = time.Duration(in.PassError(nil).Window * float64(time.Second))
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

// forecastFlag is --forecast with an optional THRESHOLD after it
// (--forecast, --forecast 0.6, --forecast=0.6): a flag kong takes as a
// bool, which then reads a number if one follows.
type forecastFlag struct {
	On        bool
	Threshold float64 // 0: the association's fair level
}

func (f *forecastFlag) IsBool() bool { return true }

func (f *forecastFlag) Decode(ctx *kong.DecodeContext) error {
	f.On = true
	tok := ctx.Scan.Peek()
	if tok.Type != kong.FlagValueToken && !tok.IsValue() {
		return nil
	}
	var v float64
	switch x := tok.Value.(type) {
	case bool: // --config.file's true or false
		ctx.Scan.Pop()
		f.On = x
		return nil
	case float64: // --config.file's number
		v = x
	case string:
		if b, err := strconv.ParseBool(x); err == nil && tok.Type == kong.FlagValueToken {
			ctx.Scan.Pop() // --forecast=true, $SLURMDBD_EXPORTER_FORECAST
			f.On = b
			return nil
		}
		var err error
		if v, err = strconv.ParseFloat(x, 64); err != nil {
			if tok.Type == kong.FlagValueToken {
				return fmt.Errorf("threshold %q: expected a factor between 0 and 1", x)
			}
			return nil // not ours: kong reports it
		}
	default:
		return nil
	}
	if !(v > 0 && v <= 1) {
		return fmt.Errorf("threshold %v: expected a factor above 0 and at most 1", v)
	}
	ctx.Scan.Pop()
	f.Threshold = v
	return nil
}

// ForecastFlags are explain's recovery forecast and what-if shares.
type ForecastFlags struct {
	Forecast forecastFlag `name:"forecast" placeholder:"THRESHOLD" help:"With --user: the factor now and over the next 7 days with no new jobs from the user and the others using the cluster as over --forecast.window or as their running jobs commit, whichever is more, and when it reaches THRESHOLD (default: its fair level) (docs/forecast.md)."`
	ForecastWindowFlag
	ForecastAt []time.Duration `name:"forecast.at" placeholder:"DURATION" help:"With --forecast: also show the factor this long from now (repeatable), e.g. a few PriorityCalcPeriods to compare with sshare later."`
	WhatIf     []string        `name:"what-if" placeholder:"ACCOUNT[/USER]=SHARES" help:"Recompute with these raw shares (repeatable; parent for FairShare=parent) and list the associations whose factor or Fair Tree rank changes (docs/forecast.md). Reads only."`
}

func (f *ForecastFlags) validate(user string, job uint32) error {
	switch {
	case f.Forecast.On && user == "":
		return fmt.Errorf("--forecast: expected --user, the user whose factor to forecast")
	case f.Forecast.On && len(f.WhatIf) > 0:
		return fmt.Errorf("--forecast and --what-if: expected one of them")
	case (f.Forecast.On || len(f.WhatIf) > 0) && job != 0:
		return fmt.Errorf("--job: not with --forecast or --what-if")
	case slices.ContainsFunc(f.ForecastAt, func(d time.Duration) bool { return d <= 0 }):
		return fmt.Errorf("--forecast.at %v: expected positive durations such as 5m", f.ForecastAt)
	case len(f.ForecastAt) > 0 && !f.Forecast.On:
		return fmt.Errorf("--forecast.at: expected --forecast")
	}
	_, err := f.shareChanges()
	return err
}

// shareChanges parses --what-if.
func (f *ForecastFlags) shareChanges() ([]fairshare.ShareChange, error) {
	var out []fairshare.ShareChange
	for _, w := range f.WhatIf {
		c, err := explain.ParseShareChange(w)
		if err != nil {
			return nil, fmt.Errorf("--what-if %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}
