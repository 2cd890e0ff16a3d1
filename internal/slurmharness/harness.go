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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	if !cfg.HourAt.IsZero() {
		c.writeZone(cfg.HourAt)
	}
	if root != "" {
		// before the database and the daemons: the mounts go last
		c.startChroot()
	}
	c.startDaemons()
	if root != "" {
		t.Logf("%s from Debian %s:\n%s", strings.TrimSpace(c.MustRun("sinfo", "-V")), suite, versions)
	} else {
		t.Logf("%s from the host", strings.TrimSpace(c.MustRun("sinfo", "-V")))
	}
	return c
}

// requireRelease makes sure the Slurm release can run: the host's
// packages (root ""), or a chroot of the Debian suite that packages it,
// whose package versions it returns.
func requireRelease(t testing.TB, release string) (root, suite, versions string) {
	t.Helper()
	suite, chrooted := releases[release]
	switch {
	case chrooted:
		testenv.Require(t, nil, nil) // -short skips it
		requireRoot(t)
		root, versions = openChroot(t, suite)
	case release == "" || release == "22.05":
		Require(t)
	default:
		t.Fatalf("unknown Slurm release %q", release)
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

// startDaemons starts the cluster's MariaDB, munged (or finds the
// host's), slurmdbd, slurmctld and slurmd, and waits until the node is
// idle.
func (c *Cluster) startDaemons() {
	t := c.t
	t.Helper()
	// MariaDB first: t.Cleanup runs last-in first-out, so it stops after
	// the Slurm daemons.
	c.DB = mariadbtest.Start(t, c.Dir)
	t.Cleanup(c.teardown)
	c.startMunge()
	// The database first: slurmdbd 24.11 and later creating it hit a TLS
	// error and retried 5 s later.
	if _, err := c.SQL("CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';" +
		" GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'"); err != nil {
		t.Fatalf("creating the slurm database user: %v", err)
	}
	c.writeConfigs()
	c.StartDaemon("slurmdbd")
	c.waitFor("slurmdbd to answer", 60*time.Second, func() error {
		_, err := c.Run("sacctmgr", "-n", "-P", "show", "cluster")
		return err
	})
	c.Sacctmgr("add", "cluster", c.Name)
	c.startCtld()
	c.StartDaemon("slurmd")
	for i := 2; i <= c.cfg.Nodes; i++ {
		c.StartDaemon(fmt.Sprintf("slurmd-n%d", i))
	}
	c.waitFor("the nodes to be idle", 90*time.Second, func() error {
		// a line per node and partition
		out, err := c.Run("sinfo", "-h", "-N", "-o", "%N %T")
		states := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if node, st, ok := strings.Cut(l, " "); ok {
				states[node] = st
			}
		}
		for _, st := range states {
			if err == nil && !strings.HasPrefix(st, "idle") {
				err = fmt.Errorf("node states %v", states)
			}
		}
		if err == nil && len(states) != c.cfg.Nodes {
			err = fmt.Errorf("nodes %v, want %d", states, c.cfg.Nodes)
		}
		return err
	})
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

// startMunge starts the host's munged unless a credential round trip
// already works; every cluster on the host shares it, as on a real head
// node. A chroot release's cluster has one of its own.
func (c *Cluster) startMunge() {
	if c.root != "" {
		c.startChrootMunge()
		return
	}
	// clusters start side by side: one of them starts the host's munged
	hostMunge.Lock()
	defer hostMunge.Unlock()
	if mungeWorks() {
		return
	}
	for _, cmd := range [][]string{
		{"mkdir", "-p", "/run/munge"},
		{"chown", "munge:munge", "/run/munge"},
		{"runuser", "-u", "munge", "--", "/usr/sbin/munged"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			c.t.Fatalf("starting munged: %s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	}
	c.waitFor("munged to answer", 30*time.Second, func() error {
		if !mungeWorks() {
			return errors.New("munge -n | unmunge fails")
		}
		return nil
	})
}

var hostMunge sync.Mutex

func mungeWorks() bool {
	return exec.Command("sh", "-c", "munge -n | unmunge").Run() == nil
}

// SQL runs statements as root on the cluster's MariaDB.
func (c *Cluster) SQL(stmts string) (string, error) { return c.DB.SQL(stmts) }

func (c *Cluster) writeConfigs() {
	storage := fmt.Sprintf("StorageHost=127.0.0.1\nStoragePort=%d\n", c.DB.Port)
	if c.root != "" {
		storage = "StorageHost=localhost\n" // the Unix socket: see chrootCommand
	}
	dbd := fmt.Sprintf(`AuthType=auth/munge
DbdHost=localhost
DbdPort=%d
SlurmUser=root
StorageType=accounting_storage/mysql
%sStorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
PidFile=%[3]s/slurmdbd.pid
LogFile=%[3]s/slurmdbd.log
DebugLevel=info
`, c.dbdPort, storage, c.inDir) + c.chrootConf(false)
	if err := os.WriteFile(filepath.Join(c.Dir, "slurmdbd.conf"), []byte(dbd), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.Conf, []byte(c.slurmConf()), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if c.cfg.GPUs > 0 {
		c.writeGres()
	}
}

// writeGres writes gres.conf beside slurm.conf (where slurmd looks for
// it), a line per GPU, each naming a character device of its own under
// Dir (made once; major 195 as NVIDIA's): slurmd needs the file to exist,
// and nothing opens it, since no job here touches a GPU.
func (c *Cluster) writeGres() {
	dev := filepath.Join(c.Dir, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	for n := 1; n <= c.cfg.Nodes; n++ {
		for i := 0; i < c.cfg.GPUs; i++ {
			name := fmt.Sprintf("n%d-gpu%d", n, i)
			if _, err := os.Stat(filepath.Join(dev, name)); err != nil {
				minor := fmt.Sprint((n-1)*c.cfg.GPUs + i)
				if out, err := exec.Command("mknod", "-m", "0666", filepath.Join(dev, name), "c", "195", minor).CombinedOutput(); err != nil {
					c.t.Fatalf("mknod %s: %v\n%s", name, err, out)
				}
			}
			fmt.Fprintf(&b, "NodeName=n%d Name=gpu File=%s\n", n, filepath.Join(c.inDir, "dev", name))
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "gres.conf"), []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) slurmConf() string {
	var b strings.Builder
	head := fmt.Sprintf(`ClusterName=%s
SlurmctldHost=%s
SlurmctldPort=%d
SlurmdPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmdLogFile=%[5]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=%[9]s
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
MailProg=/bin/true
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=%[6]d
AccountingStorageEnforce=%[7]s
JobCompType=jobcomp/none
PriorityType=priority/multifactor
PriorityDecayHalfLife=%[8]s
`, c.Name, c.host, c.ctldPort, c.dPort, c.inDir, c.dbdPort, c.cfg.Enforce, c.cfg.HalfLife, c.cfg.SelectTypeParameters)
	if c.cfg.Nodes > 1 {
		// each slurmd its own spool, pid file and log (%n: its node)
		head = strings.NewReplacer("/spool\n", "/spool/%n\n", "/slurmd.pid\n", "/slurmd-%n.pid\n", "/slurmd.log\n", "/slurmd-%n.log\n").Replace(head)
	}
	b.WriteString(head)
	fmt.Fprintf(&b, "PriorityCalcPeriod=%d\n", int(calcPeriod/time.Minute))
	b.WriteString(c.chrootConf(true))
	if c.cfg.PriorityFlags != "" {
		fmt.Fprintf(&b, "PriorityFlags=%s\n", c.cfg.PriorityFlags)
	}
	prio := c.cfg.Priority
	if prio == nil {
		prio = []string{"PriorityWeightFairshare=100000", "PriorityWeightAge=1000"}
	}
	for _, l := range prio {
		b.WriteString(l + "\n")
	}
	if c.cfg.DefMemPerCPU > 0 {
		fmt.Fprintf(&b, "DefMemPerCPU=%d\n", c.cfg.DefMemPerCPU)
	}
	if c.cfg.GPUs > 0 {
		b.WriteString("GresTypes=gpu\nAccountingStorageTRES=gres/gpu\n")
	}
	b.WriteString(c.nodeLines())
	nodes := "n1"
	if c.cfg.Nodes > 1 {
		nodes = fmt.Sprintf("n[1-%d]", c.cfg.Nodes)
	}
	for i, p := range c.cfg.Partitions {
		def := "NO"
		if i == 0 {
			def = "YES"
		}
		name, opts, _ := strings.Cut(p, " ")
		fmt.Fprintf(&b, "PartitionName=%s Nodes=%s Default=%s MaxTime=INFINITE State=UP %s\n", name, nodes, def, opts)
	}
	for _, l := range c.cfg.Extra {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// nodeLines are slurm.conf's NodeName lines: n1 on SlurmdPort, and with
// Config.Nodes each further node on a port of its own.
func (c *Cluster) nodeLines() string {
	var b strings.Builder
	for i := 1; i <= c.cfg.Nodes; i++ {
		port := ""
		if c.cfg.Nodes > 1 {
			port = fmt.Sprintf(" Port=%d", append([]int{c.dPort}, c.nodePorts...)[i-1])
		}
		fmt.Fprintf(&b, "NodeName=n%d NodeHostname=%s NodeAddr=127.0.0.1%s CPUs=%d RealMemory=%d", i, c.host, port, c.cfg.CPUs, c.cfg.RealMemory)
		if c.cfg.GPUs > 0 {
			fmt.Fprintf(&b, " Gres=gpu:%d", c.cfg.GPUs)
		}
		b.WriteString(" State=UNKNOWN\n")
	}
	return b.String()
}

// calcPeriod is the PriorityCalcPeriod every cluster runs with (whole
// minutes in slurm.conf).
const calcPeriod = time.Minute

// CalcPeriod is the cluster's PriorityCalcPeriod: slurmctld runs a decay
// pass once in each. Waits for a pass are multiples of it.
func (c *Cluster) CalcPeriod() time.Duration { return calcPeriod }

// Env is the environment for Slurm clients of this cluster, the
// exporter among them: in a chroot release, PATH starts with wrappers that
// run each client in the chroot.
func (c *Cluster) Env() []string {
	env := append(os.Environ(), "SLURM_CONF="+c.Conf)
	if c.root != "" {
		env = append(env, "PATH="+c.binDir()+":"+os.Getenv("PATH"))
	}
	if !c.cfg.HourAt.IsZero() {
		env = append(env, "TZ="+filepath.Join(c.Dir, zoneFile))
	}
	return env
}

// zoneFile is the cluster's time zone (Config.HourAt), in Dir.
const zoneFile = "zone"

// writeZone compiles a zone whose offset from UTC makes at start a local
// hour (zic: glibc and Go read the file TZ names), and keeps it as the
// cluster's Location.
func (c *Cluster) writeZone(at time.Time) {
	if at.Unix()%60 != 0 {
		c.t.Fatalf("HourAt %v: whole minutes only", at)
	}
	east := (3600 - at.Unix()%3600) % 3600
	c.loc = time.FixedZone("HAT", int(east))
	src := filepath.Join(c.Dir, "zone.zi")
	rule := fmt.Sprintf("Zone\tHourAt\t0:%02d\t-\tHAT\n", east/60)
	if err := os.WriteFile(src, []byte(rule), 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, err := exec.Command("zic", "-d", c.Dir, src).CombinedOutput()
	if err == nil {
		err = os.Rename(filepath.Join(c.Dir, "HourAt"), filepath.Join(c.Dir, zoneFile))
	}
	if err != nil {
		c.t.Fatalf("zic: %v\n%s", err, out)
	}
}

// Location is the cluster's time zone: slurmdbd's hours are its hours.
func (c *Cluster) Location() *time.Location {
	if c.loc == nil {
		return time.Local
	}
	return c.loc
}

// command runs a Slurm program for this cluster: from PATH on the host,
// or inside the release's chroot.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if c.root != "" {
		return c.chrootCommand(ctx, "", name, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	return cmd
}

// StartDaemon starts slurmdbd, slurmctld or slurmd (n1's; slurmd-n2 and
// on: the further nodes', Config.Nodes) in the foreground as a child of
// the test.
func (c *Cluster) StartDaemon(name string) {
	var args []string
	switch name {
	case "slurmdbd":
		args = []string{"-D"}
	case "slurmctld":
		args = []string{"-D"}
	case "slurmd":
		args = []string{"-D", "-N", "n1"}
	default:
		// slurmd-n2 and on: the further nodes' slurmd (Config.Nodes)
		if node, ok := strings.CutPrefix(name, "slurmd-"); ok {
			c.spawn(name, c.command(context.Background(), "slurmd", "-D", "-N", node))
			return
		}
		c.t.Fatalf("unknown daemon %q", name)
	}
	c.spawn(name, c.command(context.Background(), name, args...))
}

func (c *Cluster) spawn(name string, cmd *exec.Cmd) {
	logf, err := os.OpenFile(filepath.Join(c.Dir, name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a test killed by its timeout takes its daemons along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	go func() { cmd.Wait(); logf.Close() }()
	c.mu.Lock()
	c.procs[name] = cmd
	c.mu.Unlock()
}

// StopDaemon stops one daemon and waits for it to exit: SIGTERM, then
// SIGKILL after stopGrace. It reports whether it had to kill it.
func (c *Cluster) StopDaemon(name string) (killed bool) {
	c.mu.Lock()
	cmd := c.procs[name]
	delete(c.procs, name)
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return false
	}
	t0 := time.Now()
	killed = stop(cmd)
	if took := time.Since(t0); killed || took > 5*time.Second {
		c.t.Logf("%s took %v to stop (killed: %v)", name, took.Round(time.Millisecond), killed)
	}
	return killed
}

// stopGrace is how long a daemon has to exit after SIGTERM. slurmctld
// saves its state (assoc_usage among it) on the way out and otherwise
// only every 5 minutes (PERIODIC_CHECKPOINT): killed, it comes back with
// up to 5 minutes of usage lost. On a loaded machine its shutdown has
// taken over 20 s (a CI run's "state kept" restart lost 26% of everyone's
// usage), so the grace is generous.
const stopGrace = 2 * time.Minute

func stop(cmd *exec.Cmd) (killed bool) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) {
		if syscall.Kill(cmd.Process.Pid, 0) != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return true
}

// RestartCtld stops slurmctld, sets PriorityFlags (a real restart, not
// scontrol reconfigure, which leaves wrong factors), starts it again and
// waits until it answers. Running jobs survive, and so does slurmctld's
// state when it saved it on the way out: it reports whether it did.
// A restart that had to kill slurmctld fails the test. One that found a
// lock held is real Slurm (see savedState) and is the caller's to judge.
func (c *Cluster) RestartCtld(priorityFlags string) (saved bool) {
	log := filepath.Join(c.Dir, "slurmctld.log")
	var from int64
	if fi, err := os.Stat(log); err == nil {
		from = fi.Size()
	}
	if c.StopDaemon("slurmctld") {
		c.t.Errorf("slurmctld did not exit within %v of SIGTERM: killed, its state since its last checkpoint is lost", stopGrace)
	}
	saved = c.savedState(log, from)
	c.SetPriorityFlags(priorityFlags)
	c.startCtld()
	return saved
}

// KillCtld kills slurmctld with SIGKILL, as a crash or the OOM killer
// would, waits until it is gone, starts it again and waits until it
// answers. Killed, it saves nothing on the way out: it comes back from
// its last periodic checkpoint (PERIODIC_CHECKPOINT, every 5 minutes) of
// assoc_usage, the usage charged since lost. Its jobs run on under
// slurmd and slurmstepd, which are not in its process group.
func (c *Cluster) KillCtld() {
	c.t.Helper()
	c.mu.Lock()
	cmd := c.procs["slurmctld"]
	delete(c.procs, "slurmctld")
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		c.t.Fatal("KillCtld: slurmctld is not running")
	}
	// its group: slurmscriptd, its child, goes with it
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	c.waitFor("slurmctld to die of SIGKILL", 30*time.Second, func() error {
		// spawn's goroutine reaps it; until then it is a zombie
		if syscall.Kill(cmd.Process.Pid, 0) == nil {
			return fmt.Errorf("pid %d still there", cmd.Process.Pid)
		}
		return nil
	})
	c.startCtld()
}

// savedState reads what slurmctld logged from offset from on while it
// shut down. It saves its state (assoc_usage among it) on the way out only
// if no slurmctld lock is held at that moment (controller.c,
// _slurmctld_background: report_locks_set), else it logs "can not save
// state" and its next start loads the last periodic checkpoint, up to 5
// minutes old (PERIODIC_CHECKPOINT): every release does this, and a
// loaded machine makes it likelier.
func (c *Cluster) savedState(log string, from int64) bool {
	f, err := os.Open(log)
	if err != nil {
		c.t.Fatalf("reading slurmctld's log: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<30))
	if err != nil {
		c.t.Fatalf("reading slurmctld's log: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "Locks left set") || strings.Contains(strings.ToLower(l), "can not save state") {
			c.t.Logf("slurmctld did not save its state on the way out: %s", l)
		}
	}
	return bytes.Contains(b, []byte("Saving all slurm state"))
}

// SetPriorityFlags rewrites slurm.conf with these PriorityFlags; the
// daemons see them after scontrol reconfigure or a restart.
func (c *Cluster) SetPriorityFlags(flags string) {
	c.cfg.PriorityFlags = flags
	c.writeConfigs()
}

// SetPartition rewrites slurm.conf with these options on partition name
// (after Nodes, Default, MaxTime and State); the daemons see them after
// scontrol reconfigure or a restart, an exporter reading the file at once.
func (c *Cluster) SetPartition(name, opts string) {
	c.t.Helper()
	for i, p := range c.cfg.Partitions {
		if n, _, _ := strings.Cut(p, " "); n == name {
			c.cfg.Partitions[i] = name + " " + opts
			c.writeConfigs()
			return
		}
	}
	c.t.Fatalf("no partition %q in %v", name, c.cfg.Partitions)
}

// startCtld starts slurmctld and waits until it answers.
func (c *Cluster) startCtld() {
	c.StartDaemon("slurmctld")
	c.waitFor("slurmctld to answer", 60*time.Second, func() error {
		out, err := c.Run("scontrol", "ping")
		if err == nil && !strings.Contains(out, "UP") {
			err = errors.New(out)
		}
		return err
	})
}

func (c *Cluster) teardown() {
	if c.t.Failed() {
		for _, f := range []string{"slurmctld.log", "slurmdbd.log", "slurmd.log", "slurmrestd.out", "slurmrestd-local.out"} {
			if b, err := os.ReadFile(filepath.Join(c.Dir, f)); err == nil {
				c.t.Logf("--- %s (tail)\n%s", f, testenv.Tail(b))
			}
		}
	}
	if _, ok := c.procs["slurmctld"]; ok {
		_, _ = c.Run("scancel", "--full", "-M", c.Name, "-u", "*")
		for _, u := range c.users() {
			_, _ = c.Run("scancel", "-u", u)
		}
		c.waitJobsGone(30 * time.Second)
	}
	daemons := []string{"slurmrestd", "slurmrestd-local", "slurmd"}
	for i := 2; i <= c.cfg.Nodes; i++ {
		daemons = append(daemons, fmt.Sprintf("slurmd-n%d", i))
	}
	for _, name := range append(daemons, "slurmctld", "slurmdbd", "munged") {
		c.StopDaemon(name)
	}
	if !c.t.Failed() || testenv.CI() {
		os.RemoveAll(c.Dir)
	} else {
		c.t.Logf("kept %s for inspection", c.Dir)
	}
}

func (c *Cluster) users() []string {
	out, err := c.Run("squeue", "-h", "-o", "%u")
	if err != nil {
		return nil
	}
	return strings.Fields(out)
}

func (c *Cluster) waitJobsGone(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		out, err := c.Run("squeue", "-h", "-o", "%i")
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(time.Second)
	}
}

// Run runs a Slurm client against this cluster with a 60 s limit.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// MustRun is Run that fails the test on error.
func (c *Cluster) MustRun(name string, args ...string) string {
	c.t.Helper()
	out, err := c.Run(name, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// Sacctmgr runs sacctmgr -i with the arguments.
func (c *Cluster) Sacctmgr(args ...string) string {
	c.t.Helper()
	return c.MustRun("sacctmgr", append([]string{"-i"}, args...)...)
}

// LoadTree runs each sacctmgr command (e.g. {"add", "account", "a",
// "parent=root", "fairshare=40"}) against this cluster.
func (c *Cluster) LoadTree(cmds [][]string) {
	c.t.Helper()
	for _, cmd := range cmds {
		c.Sacctmgr(append(cmd[:len(cmd):len(cmd)], "cluster="+c.Name)...)
	}
}

// waitFor calls ok until it returns nil, every half second for d, and
// fails the test with its last error after that. It calls ok at least
// once, d <= 0 too: a wait that never looked has no error to report.
func (c *Cluster) waitFor(what string, d time.Duration, ok func() error) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := ok()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			c.t.Fatalf("waiting %v for %s: %v", d, what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
