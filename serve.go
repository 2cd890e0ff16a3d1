package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/serve"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sim"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// gcPercent is serve's garbage collection target unless GOGC sets one.
// The heap is a steady live set (the trees, the report, the rendered
// exposition: some 150 MB at 100k associations) plus bursts at each report
// and decay pass; at Go's default of 100, a collection during a burst let
// the heap grow to twice both before the next. 50 costs a collection about
// every 15 s instead of 30 s under a report every 30 s at 100k, a fraction
// of a percent of a core (docs/performance.md).
const gcPercent = 50

// defaultPort: the Prometheus allocation range 9100-9999 is full, so the
// exporter takes a port outside it; 10819 echoes slurmdbd's 6819.
const defaultPort = "10819"

type serveCmd struct {
	ListenAddress []string `name:"web.listen-address" default:":${port}" sep:"," help:"Addresses to listen on for the web interface and metrics (repeatable)."`
	SystemdSocket bool     `name:"web.systemd-socket" help:"Use systemd socket activation listeners instead of --web.listen-address."`
	WebConfig     string   `name:"web.config.file" type:"existingfile" help:"exporter-toolkit web configuration file: TLS and basic authentication (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)."`

	cli.DBFlags
	cli.SlurmFlags
	cli.ClusterFlag
	RefreshInterval time.Duration `name:"refresh-interval" default:"60s" help:"How often to read the database."`
	StoragePath     string        `name:"storage.path" type:"path" help:"Directory to keep each cluster's decayed usage in across restarts (<cluster>.usage), so that a restart reads only what came after instead of the whole history, and the phase of slurmctld's decay passes as reads pinned it (<cluster>.passes), so that a restart need not infer it again ('': none)."`

	cli.ReportedFlags
	ReportedInterval time.Duration `name:"reported.interval" help:"How often to read what Slurm reports (default: PriorityCalcPeriod). The reads are timed around slurmctld's decay passes, at most three a period; an interval under a third of the period lifts that cap."`
	ReportedStale    int           `name:"reported.stale-intervals" default:"3" help:"Withdraw the reported values and their drift once the last good report is this many --reported.interval old."`
	cli.DriftFlags
	NamedAssociations int `name:"drift.named-associations" default:"10" help:"Name this many user associations drifting the most on usage, and those on one side only, in slurmdbd_fairshare_drift_association (0: none)."`
	cli.MauiFlags

	Users          bool   `name:"collector.users" default:"true" negatable:"" help:"Export user associations (--no-collector.users: accounts only)."`
	AccountInclude string `name:"collector.account-include" help:"Export only accounts whose whole name matches this regular expression."`
	AccountExclude string `name:"collector.account-exclude" help:"Leave out accounts whose whole name matches this regular expression."`
	Extended       bool   `name:"collector.extended" help:"Export every per-association series: per-TRES, normalized and uncharged usage, both algorithms' values and the what-if factors (ticket_based, maui): 17 or more series per association instead of at most 8."`
	cli.ForecastWindowFlag
	ForecastInterval time.Duration `name:"forecast.interval" default:"4h" help:"Recompute slurmdbd_fairshare_recovery_seconds (one series per user association) this often, a forecast of every user (0: off), or less often where it costs more than 20% of the refreshes in between; the last one is served in between, with its moment."`
	MaxAssociations  int           `name:"collector.max-associations" default:"100000" help:"Most associations exported per cluster (0: no limit); beyond it users, then accounts, are left out and counted."`

	cli.DemoFlags
	cli.SimFlags
}

// Validate checks what the flag groups (their own Validate, which kong
// calls) cannot.
func (s *serveCmd) Validate() error {
	if s.RefreshInterval <= 0 {
		return fmt.Errorf("--refresh-interval %v: expected a positive duration", s.RefreshInterval)
	}
	if s.ForecastInterval < 0 {
		return fmt.Errorf("--forecast.interval %v: expected a duration >= 0", s.ForecastInterval)
	}
	if s.ReportedInterval < 0 || s.ReportedStale < 1 {
		return fmt.Errorf("--reported.interval %v, --reported.stale-intervals %d: expected a duration >= 0 and a count >= 1", s.ReportedInterval, s.ReportedStale)
	}
	if s.MaxAssociations < 0 {
		return fmt.Errorf("--collector.max-associations %d: expected a count >= 0 (0: no limit)", s.MaxAssociations)
	}
	if s.WebConfig != "" {
		if err := web.Validate(s.WebConfig); err != nil {
			return fmt.Errorf("--web.config.file %s: %w", s.WebConfig, err)
		}
	}
	if s.StoragePath != "" && !s.Demo {
		f, err := os.CreateTemp(s.StoragePath, ".write-test-*")
		if err != nil {
			return fmt.Errorf("--storage.path %s: expected a directory the exporter can write: %w", s.StoragePath, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

func (s *serveCmd) filter() (collector.Filter, error) {
	f := collector.Filter{NoUsers: !s.Users, MaxAssociations: s.MaxAssociations}
	var err error
	if f.Include, err = collector.CompileAnchored("--collector.account-include", s.AccountInclude); err != nil {
		return f, err
	}
	f.Exclude, err = collector.CompileAnchored("--collector.account-exclude", s.AccountExclude)
	return f, err
}

func (s *serveCmd) Run(env *runEnv) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ignoreHangup(ctx, env.log)
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	filter, err := s.filter()
	if err != nil {
		return err
	}
	col := collector.New()
	col.Extended, col.Filter = s.Extended, filter
	if s.Demo {
		return s.demo(ctx, env, col)
	}
	// Listen at once: the startup checks wait for the database up to
	// --db.timeout, and meanwhile /-/healthy answers and /metrics says
	// the sources are down.
	down := &result.Snapshot{Sources: map[string]result.Source{"db": {}}, Published: time.Now()}
	if s.ReportedSource != "none" {
		down.Sources["reported"] = result.Source{}
	}
	if err := col.Publish(down); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var exp atomic.Pointer[serve.Loop]
	served := make(chan error, 1)
	go func() {
		served <- s.listen(ctx, env, col, func() bool { e := exp.Load(); return e != nil && e.Ready() })
	}()
	started := make(chan error, 1)
	go func() {
		l, err := s.loop(ctx, env.log, col)
		if err == nil {
			exp.Store(l)
			go l.Run(ctx)
		}
		started <- err
	}()
	select {
	case err := <-served:
		return err
	case err := <-started:
		if err != nil {
			cancel()
			<-served
			return err
		}
	}
	return <-served
}

// ignoreHangup logs SIGHUP instead of dying of it (exit 129): there is
// nothing to reload, slurm.conf is read again at every refresh.
func ignoreHangup(ctx context.Context, log zerolog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				log.Info().Msg("SIGHUP: nothing to reload (slurm.conf is read again at every refresh; flags take a restart)")
			case <-ctx.Done():
				return
			}
		}
	}()
}

// loop checks the configuration and builds the refresh loop. The
// database may be down at startup: the exporter then serves up 0 until it
// answers; a cluster it names that is not in cluster_table is an error.
func (s *serveCmd) loop(ctx context.Context, log zerolog.Logger, col *collector.Collector) (*serve.Loop, error) {
	set, err := cli.NewSetup(log, &s.DBFlags, &s.SlurmFlags)
	if err != nil {
		return nil, err
	}
	conf, dsn := set.Conf, set.DSN
	if err := slurmdbd.CheckDSN(dsn); err != nil {
		return nil, err
	}
	if db, err := slurmdbd.Open(ctx, dsn, s.DBTimeout); err != nil {
		log.Error().Err(err).Msg("database unreachable at startup: retrying every --refresh-interval")
	} else {
		for _, name := range s.Cluster {
			if _, err := db.Cluster(ctx, name); err != nil {
				db.Close()
				return nil, fmt.Errorf("--cluster: %w", err)
			}
		}
		db.Close()
	}
	opts := append(s.options(log), engine.WithQueryTimeout(s.DBTimeout), engine.WithClusters(s.Cluster...),
		engine.WithReload(func() (*slurmconf.Config, error) { return cli.LoadSlurmConf(s.SlurmConf) }), engine.WithStateDir(set.StateDir),
		engine.WithStorage(s.StoragePath))
	tc := s.tracker(conf)
	tc.StateDir, tc.Process = set.StateDir, set.Ctld
	if tc.Read, tc.BootTime, err = s.Source(log, s.SlurmConf); err != nil {
		return nil, err
	}
	if tc.Read != nil {
		t := engine.NewTracker(tc)
		t.SetConf(conf)
		opts = append(opts, engine.WithTracker(t))
	}
	return serve.NewLoop(engine.New(conf, dsn, opts...), col, s.schedule(tc.Interval)), nil
}

// options are the engine's options serve and its demo share.
func (s *serveCmd) options(log zerolog.Logger) []engine.Option {
	opts := []engine.Option{engine.WithLogger(log), engine.WithMaui(s.Config(), s.MauiInterval),
		engine.WithTolerance(drift.Tolerance{Formula: s.FormulaTolerance, Usage: s.UsageTolerance, Factor: s.FactorTolerance}), engine.WithNamed(s.NamedAssociations)}
	if s.Extended {
		opts = append(opts, engine.WithWhatIf(), engine.WithAllTRES())
	}
	return opts
}

// tracker is how serve reads the reported side under conf.
func (s *serveCmd) tracker(conf *slurmconf.Config) engine.TrackerConfig {
	interval := s.ReportedInterval
	if interval == 0 {
		interval = conf.PriorityCalcPeriod
	}
	return engine.TrackerConfig{Timeout: s.ReportedTimeout, Interval: interval, Period: conf.PriorityCalcPeriod, Confirm: 1}
}

// schedule is the loop's, reports being read every interval.
func (s *serveCmd) schedule(interval time.Duration) serve.Schedule {
	return serve.Schedule{Interval: s.RefreshInterval, StaleAfter: time.Duration(s.ReportedStale) * interval,
		ForecastWindow: s.ForecastWindow, RecoveryInterval: s.ForecastInterval}
}

// demo serves the simulated cluster through the production loop: its
// slurmdbd tables are the engine's source, its slurmctld the reported
// side, its clock the moments computed.
func (s *serveCmd) demo(ctx context.Context, env *runEnv, col *collector.Collector) error {
	sc := s.Sim()
	sc.Speed, sc.FaultInterval, sc.FaultDuration, sc.Log = s.DemoSpeed, s.DemoFaultInterval, s.DemoFaultDuration, env.log
	c, err := sim.New(sc)
	if err != nil {
		return err
	}
	tc := s.tracker(c.Conf())
	tc.Read, tc.BootTime = c.Report, c.Boot
	t := engine.NewTracker(tc)
	t.SetConf(c.Conf())
	opts := append(s.options(env.log), engine.WithSim(c, s.DemoSpeed), engine.WithTracker(t))
	l := serve.NewLoop(engine.New(c.Conf(), "", opts...), col, s.schedule(tc.Interval))
	go l.Run(ctx)
	env.log.Info().Float64("speed", s.DemoSpeed).Dur("fault_interval", s.DemoFaultInterval).Dur("fault_duration", s.DemoFaultDuration).
		Msg("serving the simulated demo cluster")
	return s.listen(ctx, env, col, l.Ready)
}

// listen serves col until ctx ends.
func (s *serveCmd) listen(ctx context.Context, env *runEnv, col *collector.Collector, ready func() bool) error {
	return col.Serve(ctx, collector.ServeConfig{Ready: ready, Version: env.version, Log: slog.New(zerolog.NewSlogHandler(env.log)),
		Web: &web.FlagConfig{WebListenAddresses: &s.ListenAddress, WebSystemdSocket: &s.SystemdSocket, WebConfigFile: &s.WebConfig}})
}
