// Command slurmdbd_exporter recomputes Slurm's fairshare from the slurmdbd
// database, compares it with what slurmctld reports, and exports both to
// Prometheus.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/alecthomas/kong"
	"github.com/prometheus/common/version"
	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/configfile"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

type logFlags struct {
	Level  string `name:"level" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn or error."`
	Format string `name:"format" default:"console" enum:"console,json" help:"Log format: console or json."`
}

type commandLine struct {
	Log     logFlags         `embed:"" prefix:"log."`
	Version kong.VersionFlag `help:"Print the version and exit."`
	Config  configfile.File  `name:"config.file" help:"JSON file of flag values, keyed by flag name (\"web.listen-address\": [\":10819\"]); flags and environment variables override it."`

	Serve   serveCmd   `cmd:"" help:"Serve Prometheus metrics: fairshare recomputed from slurmdbd, what Slurm reports, and the drift between them."`
	Explain explainCmd `cmd:"" help:"Why is a user's priority low? The path from root with shares, usage, level_fs and rank, the factor under each algorithm, and what holds it down; with --job, a pending job's priority factor by factor."`
	Check   checkCmd   `cmd:"" help:"Recompute fairshare and compare it with what Slurm reports. Exit 0: within tolerance, 1: drift, 2: error."`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var c commandLine
	exit := -1
	parser, err := newParser(&c,
		kong.Writers(stdout, stderr),
		// --help and --version call Exit; kong would go on parsing after a
		// hook's Exit returns, so unwind to parse() instead.
		kong.Exit(func(code int) { exit = code; panic(exitSentinel{}) }),
	)
	if err != nil {
		fmt.Fprintln(stderr, "slurmdbd_exporter:", err)
		return exitError
	}
	ctx, code, done := parse(parser, args)
	if done {
		if exit >= 0 {
			return exit
		}
		return code
	}
	logger := newLogger(c.Log, stderr)
	slurmdbd.LogDriver(func(msg string) { logger.Warn().Str("component", "mysql driver").Msg(msg) })
	err = ctx.Run(&runEnv{stdout: stdout, log: logger, version: versionString()})
	var ec exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return int(ec)
	default:
		fmt.Fprintln(stderr, "slurmdbd_exporter:", err)
		return exitError
	}
}

// newParser is the command line, for run and for docs/configuration.md.
func newParser(c *commandLine, opts ...kong.Option) (*kong.Kong, error) {
	vars := kong.Vars{"version": versionString(), "port": defaultPort, "demo_size": strconv.Itoa(cli.DemoAssociations)}
	return kong.New(c, append([]kong.Option{
		kong.Name("slurmdbd_exporter"),
		kong.Description("Recomputes Slurm fairshare from the slurmdbd database and exports it, with its drift from what Slurm reports, to Prometheus."),
		kong.DefaultEnvars("SLURMDBD_EXPORTER"),
		vars.CloneWith(cli.ToleranceVars()),
	}, opts...)...)
}

type exitSentinel struct{}

// parse runs kong's parser, turning its exits (help, --version) and its
// usage errors into return values: kong exits 1 on a usage error, and this
// command's 1 means drift.
func parse(p *kong.Kong, args []string) (ctx *kong.Context, code int, done bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(exitSentinel); !ok {
				panic(r)
			}
			ctx, code, done = nil, 0, true
		}
	}()
	ctx, err := p.Parse(args)
	if err != nil {
		fmt.Fprintf(p.Stderr, "slurmdbd_exporter: %v\n", err)
		fmt.Fprintln(p.Stderr, "Run 'slurmdbd_exporter --help' for usage.")
		if checkJSON(err) {
			writeFailure(p.Stdout, err)
		}
		return nil, exitError, true
	}
	return ctx, 0, false
}

func newLogger(f logFlags, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(f.Level)
	if err != nil {
		level = zerolog.InfoLevel
	}
	if f.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, NoColor: true}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// versionString is --version's one line: prometheus/common/version's
// Version, which the Makefile sets with -ldflags "-X
// github.com/prometheus/common/version.Version=..." beside Revision and
// Branch, so that --version and slurmdbd_exporter_build_info read the
// same variables.
func versionString() string { return "slurmdbd_exporter " + version.Version }

// A build without -ldflags (go build, go install) gets the module's
// version where go install recorded one, else devel, for --version and
// build_info alike.
func init() {
	if version.Version != "" {
		return
	}
	version.Version = "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version.Version = bi.Main.Version
	}
}
