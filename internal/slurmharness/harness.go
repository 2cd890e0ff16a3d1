// Package slurmharness runs a real Slurm (Debian's 22.05 packages) on this
// host for tests: munged, a throwaway MariaDB, slurmdbd, slurmctld and
// slurmd, each on private ports with its own configuration, state and spool
// directories, so that two test packages never collide. It installs what is
// missing (as root, with apt-get), and under CI=true it fails instead of
// skipping when it cannot (internal/testenv). Newer releases (Config.Release)
// run from a chroot of a newer Debian suite, built once per machine
// (chroot.go).
package slurmharness

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// Packages are the Debian packages the harness needs.
var Packages = []string{"munge", "slurmdbd", "slurmctld", "slurmd", "slurm-client", "mariadb-server", "mariadb-client"}

var binaries = []string{"munged", "munge", "unmunge", "slurmdbd", "slurmctld", "slurmd", "sacctmgr", "sshare", "sbatch", "squeue",
	"scancel", "scontrol", "sinfo", "mariadb-install-db", "mariadbd", "mariadb"}

// Require makes sure Slurm and MariaDB are installed (testenv.Require) and
// that the test runs as root, which slurmd needs to run jobs as other users.
func Require(t testing.TB) {
	t.Helper()
	testenv.Require(t, binaries, Packages)
	requireRoot(t)
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "real Slurm needs root (slurmd runs jobs as other users; chroot and mount)")
	}
}

// Config describes the cluster to start.
type Config struct {
	// Release is the Slurm release: "" or "22.05" the host's, "24.11"
	// Debian trixie's, "26.05" Debian sid's (in a chroot).
	Release string
	// PriorityFlags for slurm.conf; empty leaves the default (Fair Tree).
	PriorityFlags string
	// HalfLife is PriorityDecayHalfLife; default 0-01:00:00.
	HalfLife string
	// Enforce is AccountingStorageEnforce; default associations.
	Enforce string
	// CPUs of the one node; default 256 (SlurmdParameters=config_overrides
	// lets a small machine claim them).
	CPUs int
	// Partitions, all on the one node; the first is the default. Default
	// p1 and p2. An entry is a name, then any further PartitionName
	// options ("p2 PriorityJobFactor=10").
	Partitions []string
	// Priority lines for slurm.conf instead of the default weights
	// (PriorityWeightFairshare=100000, PriorityWeightAge=1000).
	Priority []string
	// Extra lines appended to slurm.conf.
	Extra []string
	// GPUs on the node (0: none), as a GPU site declares them:
	// GresTypes=gpu, AccountingStorageTRES=gres/gpu (jobs' tres_alloc
	// records them), the node's Gres=gpu:N and a gres.conf line per GPU.
	// Each line's File= is a dummy character device under Dir: 22.05
	// drops a GPU line without File=, and a job's GPUs are then refused.
	GPUs int
	// RealMemory of the node in MB; default 8000.
	RealMemory int
	// SelectTypeParameters; default CR_Core. CR_Core_Memory makes memory
	// a consumable resource (and jobs' --mem count in TRESBillingWeights).
	SelectTypeParameters string
	// DefMemPerCPU in MB for jobs that ask no memory (0: not set).
	DefMemPerCPU int
	// Nodes is how many nodes (n1, n2, ...) run on this host, each with
	// CPUs, RealMemory and GPUs, each partition on all of them; default
	// 1. A heterogeneous job needs more than one: its components never
	// share a node. Each node's slurmd has its own port, spool, pid file
	// and log, which needs a Slurm built with --enable-multiple-slurmd
	// (scontrol show config: MULTIPLE_SLURMD = Yes), as Debian's 22.05 is.
	Nodes int
	// HourAt, if set, starts a local hour in the cluster's time zone
	// (TZ for its daemons, its commands and Env). slurmdbd rolls usage
	// up at each local hour, so a test has the hourly rollup fall
	// where it needs it, not wait for the clock's. Whole minutes.
	HourAt time.Time
	// CtldWait is how long slurmctld may take to answer after a start;
	// default a minute. It loads every association from slurmdbd first:
	// at 100k, after a generation has left the database flushing, that
	// took longer.
	CtldWait time.Duration
}

// Cluster is a running Slurm cluster on this host.
type Cluster struct {
	t    testing.TB
	cfg  Config
	Name string
	// Dir holds configuration, state, spool, logs and the database; in a
	// chroot release, inside the chroot.
	Dir string
	// Conf is the path of slurm.conf as the host sees it, for the
	// exporter's --slurm-conf. In a chroot release the paths it holds
	// (StateSaveLocation among them) are the daemons', inside the chroot:
	// give the exporter --slurm.state-dir StateDir().
	Conf string
	// DB is the cluster's throwaway MariaDB; slurmdbd connects as user
	// slurm, root has no password.
	DB                       *mariadbtest.Server
	dbdPort, ctldPort, dPort int
	// nodePorts are the slurmd ports of n2 and on (Config.Nodes)
	nodePorts []int
	host      string
	// prefix is where a release built apart is installed (BuildsEnv).
	prefix string
	// root is the chroot of the release, "" on the host; inDir is Dir as
	// the daemons see it.
	root, inDir string

	// loc is the zone of Config.HourAt (nil: the host's)
	loc *time.Location

	mu    sync.Mutex
	procs map[string]*exec.Cmd
}

// Start brings up a cluster and registers its teardown with t.Cleanup.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	root, suite, versions := requireRelease(t, cfg.Release)
	cfg.setDefaults()
	c := newCluster(t, cfg, root)
	c.prefix, _ = builtPrefix(cfg.Release)
	if !cfg.HourAt.IsZero() {
		c.writeZone(cfg.HourAt)
	}
	if root != "" {
		// before the database and the daemons: the mounts go last
		c.startChroot()
	} else {
		c.linkClients()
	}
	c.startDaemons()
	switch {
	case root != "":
		t.Logf("%s from Debian %s:\n%s", c.Version(), suite, versions)
	case c.prefix != "":
		t.Logf("%s built apart, in %s", c.Version(), c.prefix)
	default:
		t.Logf("%s from the host", c.Version())
	}
	return c
}

// requireRelease makes sure the Slurm release can run: the host's
// packages (root ""), a chroot of the Debian suite that packages it, whose
// package versions it returns, or a build under $BuildsEnv.
func requireRelease(t testing.TB, release string) (root, suite, versions string) {
	t.Helper()
	suite, chrooted := releases[release]
	_, built := builtPrefix(release)
	switch {
	case chrooted:
		testenv.Require(t, nil, nil) // -short skips it
		requireRoot(t)
		root, versions = openChroot(t, suite)
	case release == "" || release == "22.05" || built:
		// a build apart runs with the host's munged and MariaDB
		Require(t)
	default:
		t.Fatalf("Slurm release %q: not the host's 22.05, no Debian suite the harness knows packages it, and $%s has no build of it (<dir>/%s/sbin/slurmctld)",
			release, BuildsEnv, release)
	}
	return root, suite, versions
}

// setDefaults fills in what cfg leaves empty.
func (cfg *Config) setDefaults() {
	if cfg.HalfLife == "" {
		cfg.HalfLife = "0-01:00:00"
	}
	if cfg.Enforce == "" {
		cfg.Enforce = "associations"
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 256
	}
	if len(cfg.Partitions) == 0 {
		cfg.Partitions = []string{"p1", "p2"}
	}
	if cfg.RealMemory == 0 {
		cfg.RealMemory = 8000
	}
	if cfg.SelectTypeParameters == "" {
		cfg.SelectTypeParameters = "CR_Core"
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
}

// newCluster is the cluster's name, host, ports and directory with its
// state and spool, in the chroot root ("": on the host).
func newCluster(t testing.TB, cfg Config, root string) *Cluster {
	t.Helper()
	// In a chroot the directory is inside it, where the daemons see it.
	dir, err := os.MkdirTemp(root, "run-")
	if root == "" {
		dir, err = os.MkdirTemp("", "slurmh")
	}
	if err == nil {
		// job users read their batch scripts from the spool below it
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	c := &Cluster{t: t, cfg: cfg, Name: "h" + randHex(4), Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), host: host, procs: map[string]*exec.Cmd{},
		root: root, inDir: dir}
	if root != "" {
		c.inDir = "/" + filepath.Base(dir)
	}
	ports := freePorts(t, 2+cfg.Nodes)
	c.dbdPort, c.ctldPort, c.dPort, c.nodePorts = ports[0], ports[1], ports[2], ports[3:]
	for _, d := range []string{"state", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func freePorts(t testing.TB, n int) []int {
	var ports []int
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
