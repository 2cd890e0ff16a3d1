package main

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

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
)

// The flag groups the commands share: one name and one meaning per
// concept. Names an earlier release used stay as hidden aliases (kong
// shows no flag alias in --help) for one more release: --sshare-timeout,
// --usage-tolerance, --factor-tolerance and --tolerance (check).

// dsnEnv holds the database DSN when no --dsn-file is given. There is no
// flag for the DSN itself: a password on a command line is visible to
// every user of the host.
const dsnEnv = "SLURMDBD_EXPORTER_DSN"

// dsnFlag is where the database DSN comes from, and how long a query may
// take: every command that reads the database has both.
type dsnFlag struct {
	DSNFile   string        `name:"dsn-file" type:"path" help:"File holding the database DSN, user:password@tcp(host:3306)/slurm_acct_db (or set $SLURMDBD_EXPORTER_DSN)."`
	DBTimeout time.Duration `name:"db.timeout" default:"30s" help:"Limit for connecting and for each database query."`
}

// required is the DSN, which must be given.
func (d *dsnFlag) required(log zerolog.Logger) (string, error) {
	dsn, err := d.dsn(log)
	if err == nil && dsn == "" {
		err = errors.New("no database DSN: expected --dsn-file or $" + dsnEnv)
	}
	return dsn, err
}

// maxDSNFile bounds what --dsn-file reads: a DSN is one line.
const maxDSNFile = 64 << 10

// dsn reads the DSN. A file that others can read is warned about: it
// holds the database password.
func (d *dsnFlag) dsn(log zerolog.Logger) (string, error) {
	if d.DSNFile == "" {
		return os.Getenv(dsnEnv), nil
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

func (d *dsnFlag) validate() error {
	if d.DBTimeout <= 0 {
		return fmt.Errorf("--db.timeout %v: expected a positive duration", d.DBTimeout)
	}
	return nil
}

// slurmFlags say where slurmctld's settings and state are.
type slurmFlags struct {
	SlurmConf string `name:"slurm-conf" default:"/etc/slurm/slurm.conf" type:"path" help:"slurm.conf: the priority settings, and ClusterName, the cluster whose reports are compared."`
	StateDir  string `name:"slurm.state-dir" type:"path" help:"slurmctld's StateSaveLocation: priority_last_decay_ran gives the phase of the decay passes (default: StateSaveLocation from slurm.conf, when readable)."`
}

// savedBoot is slurmctld's boot for a replay of a capture: what a live
// run asks slurmctld. The boot orders tied Fair Tree siblings and says
// which finished jobs' tails fell at passes of the boot whose phase is
// known.
type savedBoot struct {
	SlurmctldConfigFile string `name:"slurmctld.config-file" type:"existingfile" help:"A replay's slurmctld boot: the output of 'scontrol show config' saved with the --sshare-file (check) or at the --at moment (explain), whose BOOT_TIME is read as a live run reads it from scontrol (without it, slurmctld's boot is unknown)."`
}

// saved is the saved BOOT_TIME as engine.Exporter.BootTime.
func (s *savedBoot) saved() (func(context.Context) (time.Time, error), error) {
	b, _, err := regular.Read(s.SlurmctldConfigFile, sshare.MaxBytes)
	if err == nil {
		var boot time.Time
		if boot, err = sshare.ParseBootTime(bytes.NewReader(b)); err == nil {
			return func(context.Context) (time.Time, error) { return boot, nil }, nil
		}
	}
	return nil, fmt.Errorf("--slurmctld.config-file %s: %w", s.SlurmctldConfigFile, err)
}

// oneShot is the logger of a command that computes once: what serve
// logs at info (restoring state, each refresh) is noise there.
func oneShot(log zerolog.Logger) zerolog.Logger {
	return log.Level(max(log.GetLevel(), zerolog.WarnLevel))
}

// reportedTimeout bounds one read of what Slurm reports.
type reportedTimeout struct {
	ReportedTimeout time.Duration `name:"reported.timeout" aliases:"sshare-timeout" default:"30s" help:"Limit for one read of what Slurm reports; sshare is killed when it passes."`
}

// driftFlags are how far the database's side may be from Slurm's before
// it counts as drift.
type driftFlags struct {
	UsageTolerance  float64 `name:"drift.usage-tolerance" aliases:"usage-tolerance" default:"0.005" help:"Usage drift allowed between the database's RawUsage and Slurm's (relative; 0.005 is 0.5%)."`
	FactorTolerance float64 `name:"drift.factor-tolerance" aliases:"factor-tolerance" default:"0.01" help:"Effect of usage drift on the factor allowed (absolute)."`
}

// mauiFlags configure the Maui what-if view.
type mauiFlags struct {
	MauiInterval time.Duration `name:"maui.fsinterval" default:"12h" help:"Maui what-if view: FSINTERVAL, the length of a window (0 turns the view off)."`
	MauiDepth    int           `name:"maui.fsdepth" default:"8" help:"Maui what-if view: FSDEPTH, the number of windows."`
	MauiDecay    float64       `name:"maui.fsdecay" default:"1.0" help:"Maui what-if view: FSDECAY, the weight ratio of successive windows (1: none)."`
}

func (m *mauiFlags) config() fairshare.MauiConfig {
	return fairshare.MauiConfig{Depth: m.MauiDepth, Decay: m.MauiDecay}
}

func (m *mauiFlags) validate() error {
	if m.MauiInterval < 0 {
		return fmt.Errorf("--maui.fsinterval %v: expected a duration >= 0", m.MauiInterval)
	}
	return m.config().Validate()
}

// atFlag is the moment check and explain compute for.
type atFlag struct {
	At string `help:"Compute as of this moment: unix seconds or RFC 3339 (default: now); usage recorded after it is not counted. check compares it with an --sshare-file taken at that moment, and takes START/END too: the moments the file was read between (as a live read's, whose middle is the moment, and which a decay pass may have fallen in)."`
}

func (d *driftFlags) validate() error {
	if !(d.UsageTolerance >= 0) || !(d.FactorTolerance >= 0) {
		return fmt.Errorf("--drift.usage-tolerance %v, --drift.factor-tolerance %v: expected numbers >= 0", d.UsageTolerance, d.FactorTolerance)
	}
	return nil
}

// bootTime asks slurmctld when it started, within the timeout: its order
// of tied Fair Tree siblings follows from it.
func (r *reportedTimeout) bootTime(slurmConf string) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		ctx, cancel := context.WithTimeout(ctx, r.ReportedTimeout)
		defer cancel()
		return sshare.BootTime(ctx, slurmConf)
	}
}

func (r *reportedTimeout) validate() error {
	if r.ReportedTimeout <= 0 {
		return fmt.Errorf("--reported.timeout %v: expected a positive duration", r.ReportedTimeout)
	}
	return nil
}

// clusterSetup is what every command that reads the database starts
// from: slurm.conf, the DSN and slurmctld's state directory.
type clusterSetup struct {
	conf     *slurmconf.Config
	dsn      string
	stateDir string
}

// setup reads slurm.conf and the DSN; the state directory defaults to
// slurm.conf's StateSaveLocation.
func setup(log zerolog.Logger, d *dsnFlag, s *slurmFlags) (*clusterSetup, error) {
	conf, err := loadSlurmConf(s.SlurmConf)
	if err != nil {
		return nil, err
	}
	dsn, err := d.required(log)
	if err != nil {
		return nil, err
	}
	stateDir := s.StateDir
	if stateDir == "" {
		stateDir = conf.StateSaveLocation
	}
	return &clusterSetup{conf: conf, dsn: dsn, stateDir: stateDir}, nil
}

// cluster is name, or slurm.conf's ClusterName when name is empty.
func (c *clusterSetup) cluster(name string) string {
	if name == "" {
		return c.conf.ClusterName
	}
	return name
}

func parseAt(s string, now time.Time) (time.Time, error) {
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

// parseAtWindow is parseAt, or for START/END the middle of the two and
// the window itself (nil for one moment).
func parseAtWindow(s string, now time.Time) (time.Time, *[2]time.Time, error) {
	from, to, ok := strings.Cut(s, "/")
	if !ok {
		at, err := parseAt(s, now)
		return at, nil, err
	}
	start, err := parseAt(from, now)
	if err == nil && from != "" && to != "" {
		var end time.Time
		if end, err = parseAt(to, now); err == nil && !end.Before(start) {
			return start.Add(end.Sub(start) / 2), &[2]time.Time{start, end}, nil
		}
	}
	return time.Time{}, nil, fmt.Errorf("--at %q: expected a moment, or START/END with END not before START (each unix seconds or RFC 3339)", s)
}

func loadSlurmConf(path string) (*slurmconf.Config, error) {
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
