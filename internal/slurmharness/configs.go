package slurmharness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

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
