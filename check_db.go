package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/refresh"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

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

// database are the flags of check's database mode, which a DSN turns on.
type database struct {
	dsnFlag
	Cluster         string        `help:"Cluster to check (default: slurm.conf's ClusterName)."`
	SlurmConf       string        `name:"slurm-conf" default:"/etc/slurm/slurm.conf" type:"path" help:"slurm.conf, for the priority settings."`
	StateDir        string        `name:"slurm.state-dir" type:"path" help:"slurmctld's StateSaveLocation: priority_last_decay_ran gives the phase of the decay passes (default: StateSaveLocation from slurm.conf, when readable)."`
	At              string        `help:"Rebuild usage as of this moment: unix seconds or RFC 3339 (default: now). Needs --sshare-file taken at that moment."`
	SshareTimeout   time.Duration `name:"sshare-timeout" default:"30s" help:"Limit for running 'sshare -a -l -P' when no --sshare-file is given."`
	UsageTolerance  float64       `name:"usage-tolerance" default:"0.005" help:"Relative drift allowed between the database's raw usage and slurmctld's (0.005: 0.5%)."`
	FactorTolerance float64       `name:"factor-tolerance" default:"0.01" help:"Drift allowed on FairShare in database mode."`
}

func (d *database) enabled() bool { return d.DSNFile != "" || os.Getenv(dsnEnv) != "" }

func (d *database) validate() error {
	if !(d.UsageTolerance >= 0) || !(d.FactorTolerance >= 0) {
		return fmt.Errorf("--usage-tolerance %v, --factor-tolerance %v: expected numbers >= 0", d.UsageTolerance, d.FactorTolerance)
	}
	if d.SshareTimeout <= 0 {
		return fmt.Errorf("--sshare-timeout %v: expected a positive duration", d.SshareTimeout)
	}
	return nil
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
	if d.DBTimeout <= 0 {
		return "", fmt.Errorf("--db.timeout %v: expected a positive duration", d.DBTimeout)
	}
	if d.DSNFile == "" {
		return os.Getenv(dsnEnv), nil
	}
	f, err := os.OpenFile(d.DSNFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("--dsn-file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("--dsn-file %s: expected a regular file holding a DSN", d.DSNFile)
	}
	if st.Mode().Perm()&0o004 != 0 {
		log.Warn().Str("file", d.DSNFile).Str("mode", st.Mode().Perm().String()).Msg("--dsn-file is readable by every user of this host, and it holds the database password: chmod o-r it")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxDSNFile+1))
	if err != nil {
		return "", fmt.Errorf("--dsn-file %s: %w", d.DSNFile, err)
	}
	if len(b) > maxDSNFile {
		return "", fmt.Errorf("--dsn-file %s: larger than %d bytes: expected one line holding a DSN", d.DSNFile, maxDSNFile)
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

func parseAt(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %q: expected unix seconds or RFC 3339 (2026-11-22T04:00:00Z)", s)
	}
	return t, nil
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
	conf, err := loadSlurmConf(c.SlurmConf)
	if err != nil {
		return err
	}
	dsn, err := c.dsn(env.log)
	if err != nil {
		return err
	}
	var notes []string
	stateDir := c.StateDir
	if stateDir == "" {
		stateDir = conf.StateSaveLocation
	}
	passes, since, err := refresh.Decay(conf, stateDir)
	if err != nil {
		notes = append(notes, "phase of the decay passes unknown (no readable priority_last_decay_ran): usage may be off by one PriorityCalcPeriod")
		env.log.Warn().Err(err).Msg("decay pass phase unknown")
	}
	db, err := slurmdbd.Open(ctx, dsn, c.DBTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	name := c.Cluster
	if name == "" {
		name = conf.ClusterName
	}
	cluster, err := db.Cluster(ctx, name)
	if err != nil {
		return err
	}
	// slurmctld's boot time orders tied Fair Tree siblings as it does;
	// without it (sshare output from a file) ties allow their rank range.
	var boot time.Time
	if c.SshareFile == "" {
		bctx, cancel := context.WithTimeout(ctx, c.SshareTimeout)
		boot, err = sshare.BootTime(bctx, c.SlurmConf)
		cancel()
		if err != nil {
			env.log.Warn().Err(err).Msg("slurmctld boot time unknown: tied Fair Tree siblings may rank in another order")
		}
	}
	snap, err := cluster.SnapshotAsCtld(ctx, at, boot, passes, since, time.Local)
	if err != nil {
		return err
	}
	for _, p := range snap.Problems {
		env.log.Warn().Str("cluster", name).Msg(p.Error())
	}
	tree, err := fairshare.NewTree(snap.Tree.Assocs)
	if err != nil {
		return err
	}
	alg := conf.Algorithm()
	if c.Algorithm != "auto" {
		alg = fairshare.Algorithm(c.Algorithm)
	}
	vals, err := tree.Compute(alg, float64(conf.FairShareDampeningFactor))
	if err != nil {
		return err
	}
	reported, err := c.reported(ctx, conf)
	if err != nil {
		return err
	}
	bounds := relativeBounds(vals, tree.Users(), !boot.IsZero(), c.UsageTolerance, c.FactorTolerance)
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
	ctx, cancel := context.WithTimeout(ctx, c.SshareTimeout)
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
