// Package cli holds the flag groups the commands share: one name, one
// default and one set of values per concept, each group validating
// itself (kong calls Validate on every embedded group of the selected
// command: their types must be exported), and what the groups read: the
// DSN file, slurm.conf, --at, the reported source. Names an earlier
// release used stay as hidden aliases (kong shows no flag alias in
// --help) for one more release: --sshare-timeout, --usage-tolerance,
// --factor-tolerance and --tolerance (check).
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/engine"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmstate"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
)

// DSNEnv holds the database DSN when no --dsn-file is given. There is no
// flag for the DSN itself: a password on a command line is visible to
// every user of the host.
const DSNEnv = "SLURMDBD_EXPORTER_DSN"

// DBFlags are where the database DSN comes from, and how long a query may
// take: every command that reads the database has both.
type DBFlags struct {
	DSNFile   string        `name:"dsn-file" type:"path" help:"File holding the database DSN, user:password@tcp(host:3306)/slurm_acct_db (or set $SLURMDBD_EXPORTER_DSN)."`
	DBTimeout time.Duration `name:"db.timeout" default:"30s" help:"Limit for connecting and for each database query."`
}

func (d *DBFlags) Validate() error {
	if d.DBTimeout <= 0 {
		return fmt.Errorf("--db.timeout %v: expected a positive duration", d.DBTimeout)
	}
	return nil
}

// Given reports whether a DSN is given, by file or environment.
func (d *DBFlags) Given() bool { return d.DSNFile != "" || os.Getenv(DSNEnv) != "" }

// Required is the DSN, which must be given.
func (d *DBFlags) Required(log zerolog.Logger) (string, error) {
	dsn, err := d.dsn(log)
	if err == nil && dsn == "" {
		err = errors.New("no database DSN: expected --dsn-file or $" + DSNEnv)
	}
	return dsn, err
}

// maxDSNFile bounds what --dsn-file reads: a DSN is one line.
const maxDSNFile = 64 << 10

// dsn reads the DSN. A file that others can read is warned about: it
// holds the database password.
func (d *DBFlags) dsn(log zerolog.Logger) (string, error) {
	if d.DSNFile == "" {
		return os.Getenv(DSNEnv), nil
	}
	b, mode, err := regular.Read(d.DSNFile, maxDSNFile)
	switch {
	case errors.Is(err, regular.ErrNotRegular):
		return "", fmt.Errorf("--dsn-file %s: expected a regular file holding a DSN", d.DSNFile)
	case errors.Is(err, regular.ErrTooLarge):
		return "", fmt.Errorf("--dsn-file %s: larger than %d bytes: expected one line holding a DSN", d.DSNFile, maxDSNFile)
	case err != nil:
		return "", fmt.Errorf("--dsn-file: %w", err)
	}
	if mode.Perm()&0o004 != 0 {
		log.Warn().Str("file", d.DSNFile).Str("mode", mode.Perm().String()).Msg("--dsn-file is readable by every user of this host, and it holds the database password: chmod o-r it")
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return "", fmt.Errorf("--dsn-file %s is empty: expected a DSN like user:password@tcp(host:3306)/slurm_acct_db", d.DSNFile)
	}
	if strings.ContainsAny(dsn, "\r\n") {
		// the driver would take both lines as one DSN; quote none of it
		return "", fmt.Errorf("--dsn-file %s has more than one line: expected one line holding a DSN", d.DSNFile)
	}
	return dsn, nil
}

// SlurmFlags say where slurmctld's settings and state are.
type SlurmFlags struct {
	SlurmConf string `name:"slurm-conf" default:"/etc/slurm/slurm.conf" type:"path" help:"slurm.conf: the priority settings, and ClusterName, the cluster whose reports are compared."`
	StateDir  string `name:"slurm.state-dir" type:"path" help:"slurmctld's StateSaveLocation: priority_last_decay_ran gives the phase of the decay passes (default: StateSaveLocation from slurm.conf, when readable)."`
	PidFile   string `name:"slurmctld.pid-file" type:"path" help:"slurmctld's pid file, with /proc: a restart seen without asking slurmctld its boot time at every read (default: SlurmctldPidFile from slurm.conf; unreadable, or slurmctld on another host: scontrol show config at every read)."`
}

// ClusterFlag is the clusters to read. serve exports each; check and
// explain answer for one (their Validate).
type ClusterFlag struct {
	Cluster []string `help:"Cluster to read (serve: repeatable, default every cluster in cluster_table; check and explain: one, default slurm.conf's ClusterName)."`
}

// One is an error unless at most one cluster is given.
func (c *ClusterFlag) One() error {
	if len(c.Cluster) > 1 {
		return fmt.Errorf("--cluster %s: expected one cluster (serve takes several)", strings.Join(c.Cluster, ","))
	}
	return nil
}

// SavedBoot is slurmctld's boot for a replay of a capture: what a live
// run asks slurmctld. The boot orders tied Fair Tree siblings and says
// which finished jobs' tails fell at passes of the boot whose phase is
// known.
type SavedBoot struct {
	SlurmctldConfigFile string `name:"slurmctld.config-file" type:"existingfile" help:"A replay's slurmctld boot: the output of 'scontrol show config' saved with the --sshare-file (check) or at the --at moment (explain), whose BOOT_TIME is read as a live run reads it from scontrol (without it, slurmctld's boot is unknown)."`
}

// Saved is the saved BOOT_TIME, for engine.WithBootTime.
func (s *SavedBoot) Saved() (func(context.Context) (time.Time, error), error) {
	b, _, err := regular.Read(s.SlurmctldConfigFile, sshare.MaxBytes)
	if err == nil {
		var boot time.Time
		if boot, err = sshare.ParseBootTime(bytes.NewReader(b)); err == nil {
			return func(context.Context) (time.Time, error) { return boot, nil }, nil
		}
	}
	return nil, fmt.Errorf("--slurmctld.config-file %s: %w", s.SlurmctldConfigFile, err)
}

// BootSource is where a command that computes once learns slurmctld's
// boot time, which orders tied Fair Tree siblings as slurmctld does: from
// scontrol when it reads slurmctld now (live), else from
// --slurmctld.config-file when given, else nowhere (nil: ties allow
// their rank range).
func BootSource(live bool, r *ReportedTimeoutFlag, s *SavedBoot, slurmConf string) (func(context.Context) (time.Time, error), error) {
	switch {
	case live:
		return r.BootTime(slurmConf), nil
	case s.SlurmctldConfigFile != "":
		return s.Saved()
	}
	return nil, nil
}

// OneShot is the logger of a command that computes once: what serve
// logs at info (restoring state, each refresh) is noise there.
func OneShot(log zerolog.Logger) zerolog.Logger {
	return log.Level(max(log.GetLevel(), zerolog.WarnLevel))
}

// ReportedTimeoutFlag bounds one read of what Slurm reports.
type ReportedTimeoutFlag struct {
	ReportedTimeout time.Duration `name:"reported.timeout" aliases:"sshare-timeout" default:"30s" help:"Limit for one read of what Slurm reports; sshare is killed when it passes."`
}

func (r *ReportedTimeoutFlag) Validate() error {
	if r.ReportedTimeout <= 0 {
		return fmt.Errorf("--reported.timeout %v: expected a positive duration", r.ReportedTimeout)
	}
	return nil
}

// BootTime asks slurmctld when it started, within the timeout: its order
// of tied Fair Tree siblings follows from it.
func (r *ReportedTimeoutFlag) BootTime(slurmConf string) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		ctx, cancel := context.WithTimeout(ctx, r.ReportedTimeout)
		defer cancel()
		return sshare.BootTime(ctx, slurmConf)
	}
}

// ReportedFlags are where serve and explain read what Slurm reports
// (check reads sshare or --sshare-file, with ReportedTimeoutFlag alone).
type ReportedFlags struct {
	ReportedTimeoutFlag
	ReportedSource string `name:"reported.source" default:"sshare" enum:"sshare,slurmrestd,none" help:"Where to read what Slurm reports: sshare, slurmrestd or none (explain reads it only for the present: not with --at)."`
	RestURL        string `name:"slurmrestd.url" default:"http://localhost:6820" help:"slurmrestd base URL: http(s)://host:port, or unix:///path/to/slurmrestd.socket for one listening on a unix socket (rest_auth/local: no token needed)."`
	RestVersion    string `name:"slurmrestd.api-version" help:"data_parser version of the shares endpoint, /slurm/<version>/shares (v0.0.40 and later; default: the newest of v0.0.45 to v0.0.40 the server serves, detected at the first request and again when it answers 404)."`
	RestUser       string `name:"slurmrestd.user" default:"root" help:"User name sent as X-SLURM-USER-NAME."`
	RestTokenFile  string `name:"slurmrestd.token-file" type:"path" help:"File holding the JWT sent as X-SLURM-USER-TOKEN, read at every request (required for an http(s) --slurmrestd.url; optional for a unix socket)."`
}

func (r *ReportedFlags) Validate() error {
	if r.ReportedSource != "slurmrestd" {
		return nil
	}
	rest, err := sshare.NewREST(nil, r.RestURL, r.RestVersion, r.RestUser)
	if err != nil {
		return fmt.Errorf("--reported.source slurmrestd: %w", err)
	}
	if r.RestTokenFile == "" && !rest.Local() {
		return errors.New("--reported.source slurmrestd with an http(s) --slurmrestd.url: expected --slurmrestd.token-file (a unix:/// socket served with rest_auth/local needs none)")
	}
	return nil
}

// RESTReport reads the shares from slurmrestd, with the token read from
// --slurmrestd.token-file at every request when one is given. Without
// --slurmrestd.api-version, the version is detected and logged.
func (r *ReportedFlags) RESTReport(log zerolog.Logger) (engine.ReportFunc, error) {
	rest, err := sshare.NewREST(nil, r.RestURL, r.RestVersion, r.RestUser)
	if err != nil {
		return nil, err
	}
	rest.Chose = func(v string) {
		log.Info().Str("url", rest.String()).Str("api_version", v).Msg("slurmrestd: reading /shares at the newest data_parser version it serves")
	}
	return rest.FetchFunc(r.RestTokenFile), nil
}

// Source is what --reported.source reads (nil: none) and, for sshare,
// how slurmctld's boot time is asked (nil: not asked).
func (r *ReportedFlags) Source(log zerolog.Logger, slurmConf string) (read engine.ReportFunc, boot func(context.Context) (time.Time, error), err error) {
	switch r.ReportedSource {
	case "sshare":
		read = func(ctx context.Context) (*shares.Table, error) { return sshare.Run(ctx, slurmConf) }
		boot = func(ctx context.Context) (time.Time, error) { return sshare.BootTime(ctx, slurmConf) }
	case "slurmrestd":
		read, err = r.RESTReport(log)
	}
	return read, boot, err
}

// Report reads what Slurm reports once, within --reported.timeout, from
// --reported.source (nil for none).
func (r *ReportedFlags) Report(ctx context.Context, log zerolog.Logger, slurmConf string) (*shares.Table, error) {
	read, _, err := r.Source(log, slurmConf)
	if read == nil || err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.ReportedTimeout)
	defer cancel()
	return read(ctx)
}

// DriftFlags are how far the database's side and Slurm's formula may be
// from what Slurm reports before it counts as drift. The defaults are
// drift.DefaultTolerance's (kong.Vars in newParser), which explain and
// serve --demo use.
type DriftFlags struct {
	// One default for serve and check: on every capture of
	// testdata (130 reports of 22.05 to 26.05 and the six recorded
	// series) 1e-6 and 1e-4 judge alike; the largest formula
	// difference beyond print precision is 3e-7 to 5e-7 (half sshare's
	// sixth decimal), and serve compares while slurmctld's passes go on
	// (docs/serve.md).
	FormulaTolerance float64 `name:"drift.formula-tolerance" aliases:"tolerance" default:"${formula_tolerance}" help:"Formula drift allowed on top of what the inputs' precision explains (absolute; sshare prints 6 decimals)."`
	UsageTolerance   float64 `name:"drift.usage-tolerance" aliases:"usage-tolerance" default:"${usage_tolerance}" help:"Usage drift allowed between the database's RawUsage and Slurm's (relative; 0.005 is 0.5%)."`
	FactorTolerance  float64 `name:"drift.factor-tolerance" aliases:"factor-tolerance" default:"${factor_tolerance}" help:"Effect of usage drift on the factor allowed (absolute)."`
}

func (d *DriftFlags) Validate() error {
	if !(d.FormulaTolerance >= 0) {
		return fmt.Errorf("--drift.formula-tolerance %v: expected a number >= 0", d.FormulaTolerance)
	}
	if !(d.UsageTolerance >= 0) || !(d.FactorTolerance >= 0) {
		return fmt.Errorf("--drift.usage-tolerance %v, --drift.factor-tolerance %v: expected numbers >= 0", d.UsageTolerance, d.FactorTolerance)
	}
	return nil
}

// ToleranceVars are DriftFlags' defaults for kong.
func ToleranceVars() map[string]string {
	t := drift.DefaultTolerance
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return map[string]string{"formula_tolerance": f(t.Formula), "usage_tolerance": f(t.Usage), "factor_tolerance": f(t.Factor)}
}

// MauiFlags configure the Maui what-if view.
type MauiFlags struct {
	MauiInterval time.Duration `name:"maui.fsinterval" default:"12h" help:"Maui what-if view: FSINTERVAL, the length of a window (0 turns the view off)."`
	MauiDepth    int           `name:"maui.fsdepth" default:"8" help:"Maui what-if view: FSDEPTH, the number of windows."`
	MauiDecay    float64       `name:"maui.fsdecay" default:"1.0" help:"Maui what-if view: FSDECAY, the weight ratio of successive windows (1: none)."`
}

func (m *MauiFlags) Config() fairshare.MauiConfig {
	return fairshare.MauiConfig{Depth: m.MauiDepth, Decay: m.MauiDecay}
}

func (m *MauiFlags) Validate() error {
	if m.MauiInterval < 0 {
		return fmt.Errorf("--maui.fsinterval %v: expected a duration >= 0", m.MauiInterval)
	}
	return m.Config().Validate()
}

// ForecastWindowFlag is the rolled-up usage a recovery forecast assumes the
// others keep using at (serve's metric, explain --forecast).
type ForecastWindowFlag struct {
	ForecastWindow time.Duration `name:"forecast.window" default:"168h" help:"The rolled-up usage whose rate the recovery forecast assumes the others keep (serve: with --collector.extended; explain: with --forecast) (docs/forecast.md)."`
}

func (f *ForecastWindowFlag) Validate() error {
	if f.ForecastWindow <= 0 {
		return fmt.Errorf("--forecast.window %v: expected a positive duration such as 168h", f.ForecastWindow)
	}
	return nil
}

// DemoFlags are the bundled synthetic cluster, for serve and explain.
type DemoFlags struct {
	Demo             bool `help:"Use the bundled synthetic cluster (accounts a1, a2, ..., users u41, u42, ...): serve serves it, explain explains it; no database or Slurm needed."`
	DemoAssociations int  `name:"demo.associations" default:"${demo_size}" help:"Associations in the --demo cluster."`
}

func (d *DemoFlags) Validate() error {
	if d.DemoAssociations < 2 || d.DemoAssociations > 1_000_000 {
		return fmt.Errorf("--demo.associations %d: expected 2 to 1000000", d.DemoAssociations)
	}
	return nil
}

// SimFlags run serve --demo's simulated cluster.
type SimFlags struct {
	DemoSpeed         float64       `name:"demo.speed" default:"10" help:"With --demo: simulated seconds per wall second (10: an hour of the cluster's life, its rollup and twelve decay passes, in six minutes). The simulated clock gives the moments computed (computed_timestamp_seconds and the like run ahead of the wall clock by as much); the sources' health timestamps stay wall time."`
	DemoFaultInterval time.Duration `name:"demo.fault-interval" default:"15m" help:"With --demo: start a fault this often (wall time; 0: none), in turn: lost usage (UsageLost, UsageDrift), a PriorityFlags change slurmctld runs with but slurm.conf does not say (FairshareDriftHigh), a stalled rollup (RollupStalled)."`
	DemoFaultDuration time.Duration `name:"demo.fault-duration" default:"40m" help:"With --demo: how long each fault lasts (wall time): long enough for the alerts' for: clauses (UsageDrift's is 30m)."`
}

func (d *SimFlags) Validate() error {
	if d.DemoSpeed <= 0 || d.DemoSpeed > 3600 {
		return fmt.Errorf("--demo.speed %v: expected a number above 0, at most 3600", d.DemoSpeed)
	}
	if d.DemoFaultInterval < 0 || d.DemoFaultDuration < 0 {
		return fmt.Errorf("--demo.fault-interval %v, --demo.fault-duration %v: expected durations >= 0", d.DemoFaultInterval, d.DemoFaultDuration)
	}
	return nil
}

// OutputFlag is how check and explain print.
type OutputFlag struct {
	Output string `default:"table" enum:"table,json" help:"Output format: table or json."`
}

// AtFlag is the moment check and explain compute for.
type AtFlag struct {
	At string `help:"Compute as of this moment: unix seconds or RFC 3339 (default: now); usage recorded after it is not counted. check compares it with an --sshare-file taken at that moment, and takes START/END too: the moments the file was read between (as a live read's, whose middle is the moment, and which a decay pass may have fallen in)."`
}

// Setup is what every command that reads the database starts
// from: slurm.conf, the DSN and slurmctld's state directory.
type Setup struct {
	Conf     *slurmconf.Config
	DSN      string
	StateDir string
	PidFile  string
}

// Ctld is the slurmctld process on this host (slurmstate.Ctld), for
// engine.TrackerConfig.Process.
func (s *Setup) Ctld() (slurmstate.Process, error) { return slurmstate.Ctld(s.PidFile) }

// NewSetup reads slurm.conf and the DSN; the state directory defaults to
// slurm.conf's StateSaveLocation.
func NewSetup(log zerolog.Logger, d *DBFlags, s *SlurmFlags) (*Setup, error) {
	conf, err := LoadSlurmConf(s.SlurmConf)
	if err != nil {
		return nil, err
	}
	dsn, err := d.Required(log)
	if err != nil {
		return nil, err
	}
	stateDir := s.StateDir
	if stateDir == "" {
		stateDir = conf.StateSaveLocation
	}
	pidFile := s.PidFile
	if pidFile == "" {
		pidFile = conf.SlurmctldPidFile
	}
	return &Setup{Conf: conf, DSN: dsn, StateDir: stateDir, PidFile: pidFile}, nil
}

// Cluster is the one --cluster (ClusterFlag.One), or slurm.conf's
// ClusterName when none is given.
func (c *Setup) Cluster(names []string) string {
	if len(names) == 0 {
		return c.Conf.ClusterName
	}
	return names[0]
}

func ParseAt(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now, nil
	}
	// unix seconds, with a fraction for a read window's moments: digits
	// and a point, signed as before (ParseFloat alone takes 1e9, 0x1p30
	// and Inf too)
	if n, err := strconv.ParseFloat(s, 64); err == nil && strings.Trim(s, "0123456789.+-") == "" {
		return time.Unix(0, int64(n*1e9)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %q: expected unix seconds or RFC 3339 (2026-11-22T04:00:00Z)", s)
	}
	return t, nil
}

// ParseAtWindow is ParseAt, or for START/END the middle of the two and
// the window itself (nil for one moment).
func ParseAtWindow(s string, now time.Time) (time.Time, *[2]time.Time, error) {
	from, to, ok := strings.Cut(s, "/")
	if !ok {
		at, err := ParseAt(s, now)
		return at, nil, err
	}
	start, err := ParseAt(from, now)
	if err == nil && from != "" && to != "" {
		var end time.Time
		if end, err = ParseAt(to, now); err == nil && !end.Before(start) {
			return start.Add(end.Sub(start) / 2), &[2]time.Time{start, end}, nil
		}
	}
	return time.Time{}, nil, fmt.Errorf("--at %q: expected a moment, or START/END with END not before START (each unix seconds or RFC 3339)", s)
}

func LoadSlurmConf(path string) (*slurmconf.Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	conf, err := slurmconf.Load(os.DirFS("/"), strings.TrimPrefix(abs, "/"))
	if err != nil {
		return nil, fmt.Errorf("--slurm-conf %s: %w", path, err)
	}
	return conf, nil
}
