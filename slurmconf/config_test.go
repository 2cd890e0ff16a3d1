package slurmconf

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
)

// TestRealConfigs reads the slurm.conf files real Slurm 24.11.7 ran with
// (../shared/slurm-captures/24.11.7).
func TestRealConfigs(t *testing.T) {
	for _, tc := range []struct {
		file   string
		alg    fairshare.Algorithm
		limits bool
	}{
		{"slurm.conf", fairshare.AlgorithmFairTree, false},
		{"slurm-classic.conf", fairshare.AlgorithmClassic, false},
		{"slurm-limits.conf", fairshare.AlgorithmFairTree, true},
	} {
		c, err := Load(os.DirFS("../testdata/slurm-24.11"), tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if c.ClusterName != "v2411" || c.Algorithm() != tc.alg || c.EnforceLimits() != tc.limits ||
			c.PriorityDecayHalfLife != time.Hour || c.PriorityCalcPeriod != time.Minute ||
			c.PriorityWeightFairshare != 100000 || c.PriorityWeightAge != 1000 || c.PriorityType != "priority/multifactor" {
			t.Errorf("%s: %+v", tc.file, c)
		}
		if len(c.Partitions) != 1 || c.Partitions[0].Name != "main" {
			t.Errorf("%s: partitions %+v", tc.file, c.Partitions)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := FromRaw(&Raw{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Algorithm() != fairshare.AlgorithmFairTree || c.PriorityDecayHalfLife != 7*24*time.Hour || c.PriorityCalcPeriod != 5*time.Minute ||
		c.FairShareDampeningFactor != 1 || c.PriorityUsageResetPeriod != "NONE" || c.EnforceLimits() {
		t.Errorf("defaults %+v", c)
	}
}

func TestSyntax(t *testing.T) {
	fsys := fstest.MapFS{
		"etc/slurm/slurm.conf": {Data: []byte(`# a comment
ClusterName=Alpha   # lower-cased like slurmctld does
prioritytype = priority/multifactor
PriorityFlags=NO_FAIR_TREE,\
MAX_TRES
PriorityWeightTRES="CPU=1000,Mem=2000"
Include prio.d/*.conf
PartitionName=DEFAULT PriorityJobFactor=5 MaxTime=1-0
PartitionName=gpu MaxTime=UNLIMITED Nodes=n[1-4] TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2.0 PriorityJobFactor=10 PriorityTier=2
NodeName=n[1-4] CPUs=64
StateSaveLocation=/var/spool/slurm\#ctld
`)},
		"etc/slurm/prio.d/10-decay.conf":   {Data: []byte("PriorityDecayHalfLife=14-0\nPriorityCalcPeriod=2:30\n")},
		"etc/slurm/prio.d/20-enforce.conf": {Data: []byte("AccountingStorageEnforce=associations,Limits,qos\nFairShareDampeningFactor=3\n")},
	}
	c, err := Load(fsys, "etc/slurm/slurm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterName != "alpha" || c.PriorityType != "priority/multifactor" || c.Algorithm() != fairshare.AlgorithmClassic ||
		c.PriorityFlags&FlagMaxTRES == 0 || c.PriorityWeightTRES != "CPU=1000,Mem=2000" {
		t.Errorf("%+v", c)
	}
	if c.PriorityDecayHalfLife != 14*24*time.Hour || c.PriorityCalcPeriod != 3*time.Minute || !c.EnforceLimits() || c.FairShareDampeningFactor != 3 {
		t.Errorf("included settings: half-life %v, calc period %v (2:30 rounds up to 3 min), enforce %v, damp %d",
			c.PriorityDecayHalfLife, c.PriorityCalcPeriod, c.AccountingStorageEnforce, c.FairShareDampeningFactor)
	}
	if len(c.Partitions) != 1 || c.Partitions[0].TRESBillingWeights != "CPU=1.0,Mem=0.25G,GRES/gpu=2.0" || c.Partitions[0].PriorityJobFactor != 10 || c.Partitions[0].PriorityTier != 2 {
		t.Errorf("partitions %+v", c.Partitions)
	}
	// PartitionName=DEFAULT fills in what later lines leave out
	if p := c.Partitions[0]; p.Nodes != "n[1-4]" || p.MaxTime != Infinite || !c.AllNodes(p) {
		t.Errorf("partition gpu: nodes %q max time %d, all nodes %v", p.Nodes, p.MaxTime, c.AllNodes(p))
	}
	pc := c.Priority()
	if pc.WeightTRES["cpu"] != 1000 || pc.WeightTRES["mem"] != 2000 || pc.Weights[priority.TRES] != 3000 || !pc.EnforceLimits {
		t.Errorf("priority config %+v", pc)
	}
	if c.StateSaveLocation != "/var/spool/slurm#ctld" {
		t.Errorf(`\# gave %q`, c.StateSaveLocation)
	}
	if p := c.Pos["prioritydecayhalflife"]; p.File != "etc/slurm/prio.d/10-decay.conf" || p.Line != 1 {
		t.Errorf("position %v", p)
	}
}

func TestTimes(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "5": 5 * time.Minute, "90": 90 * time.Minute, "1:30": 2 * time.Minute, "1:00:00": time.Hour,
		"7-0": 7 * 24 * time.Hour, "0-01:00:00": time.Hour, "1-2": 26 * time.Hour, "1-2:30": 26*time.Hour + 30*time.Minute,
		"0-0:0:1": time.Minute,
	} {
		got, err := minutes(in)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1:2:3:4", "-1", "1-x", "7d", "1.5"} {
		if _, err := minutes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestErrors: each names the file, the line and the key.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		conf, want string
	}{
		{"\n\nPriorityDecayHalfLife=7days\n", "slurm.conf:3: PriorityDecayHalfLife=7days: expected a time"},
		{"PriorityFlags=FAIR_TREE,BOGUS\n", "slurm.conf:1: PriorityFlags=FAIR_TREE,BOGUS: unknown flag \"BOGUS\""},
		{"PriorityFlags=TICKET_BASED\n", "removed in Slurm 15.08"},
		{"FairShareDampeningFactor=0\n", "FairShareDampeningFactor=0: expected an integer from 1"},
		{"PriorityUsageResetPeriod=HOURLY\n", "PriorityUsageResetPeriod=HOURLY: expected NONE"},
		{"AccountingStorageEnforce=limit\n", "unknown enforcement \"limit\""},
		{"PriorityCalcPeriod=0\n", "PriorityCalcPeriod=0: expected at least one minute"},
		{"PriorityWeightAge=-5\n", "PriorityWeightAge=-5: expected an integer"},
		{"PartitionName=p PriorityTier=x\n", "slurm.conf:1: PartitionName=p PriorityTier=x"},
		{"just words\n", "slurm.conf:1: \"just\": expected Key=Value"},
		{"A=\"unterminated\n", "unterminated quoted value"},
		{"Include missing.conf\n", "Include /missing.conf: no such file"},
		{"PriorityWeightTRES=CPU=x\n", `PriorityWeightTRES=CPU=x: entry "CPU=x": expected TRES=weight`},
		{"NodeName=n[3-1]\n", `NodeName=n[3-1]: host list entry "n[3-1]": range "3-1"`},
		{"PartitionName=p MaxTime=forever\n", "PartitionName=p MaxTime=forever: expected a time"},
	} {
		fsys := fstest.MapFS{"slurm.conf": {Data: []byte(tc.conf)}}
		_, err := Load(fsys, "slurm.conf")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.conf, err, tc.want)
		}
	}
	fsys := fstest.MapFS{"a.conf": {Data: []byte("Include a.conf\n")}}
	if _, err := Load(fsys, "a.conf"); err == nil || !strings.Contains(err.Error(), "levels of Include") {
		t.Errorf("include loop: %v", err)
	}
	if _, err := Load(fstest.MapFS{}, "nope.conf"); err == nil || !strings.Contains(err.Error(), "nope.conf") {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzConfig(f *testing.F) {
	for _, s := range []string{"ClusterName=x\nPriorityFlags=NO_FAIR_TREE\n", "PartitionName=p TRESBillingWeights=CPU=1\\\n Nodes=a\n",
		"PriorityDecayHalfLife=1-2:3:4 # c\n", "A=\"b c\" D=e\n"} {
		f.Add(s)
	}
	// the real slurm.conf files the captures were taken with
	confs, _ := filepath.Glob("../testdata/slurm-*/slurm*.conf")
	for _, name := range confs {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, conf string) {
		raw, err := Parse("slurm.conf", strings.NewReader(conf))
		if err != nil {
			return
		}
		c, err := FromRaw(raw)
		if err != nil {
			if !strings.Contains(err.Error(), "slurm.conf:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if c.PriorityCalcPeriod <= 0 || c.FairShareDampeningFactor == 0 || c.PriorityDecayHalfLife < 0 {
			t.Fatalf("invalid config accepted: %+v", c)
		}
	})
}

func TestHostlist(t *testing.T) {
	got, err := Hostlist("n[01-03,7],gpu1,x[9-10]")
	want := []string{"n01", "n02", "n03", "n7", "gpu1", "x9", "x10"}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	c := &Config{Nodes: []string{"a1", "a2", "b"}}
	for nodes, all := range map[string]bool{"ALL": true, "a[1-2],b": true, "a[1-2]": false, "": false} {
		if c.AllNodes(Partition{Nodes: nodes}) != all {
			t.Errorf("Nodes=%s: all nodes %v, want %v", nodes, !all, all)
		}
	}
}

// TestLockHold: job_scheduler.c's max_sched_time (at most MessageTimeout/2,
// else min(max(MessageTimeout/2, 1), 2) s) against the backfill's
// bf_yield_interval (µs, 2 s by default), the longer of the two.
func TestLockHold(t *testing.T) {
	for _, c := range []struct {
		conf string
		want time.Duration
	}{
		{"", 2 * time.Second},
		{"MessageTimeout=30\nSchedulerParameters=bf_continue,max_sched_time=10\n", 10 * time.Second},
		{"MessageTimeout=30\nSchedulerParameters=max_sched_time=20\n", 2 * time.Second}, // over 15: Slurm ignores it
		{"MessageTimeout=2\n", 2 * time.Second},
		{"SchedulerParameters=bf_yield_interval=5000000\n", 5 * time.Second},
	} {
		raw, err := Parse("slurm.conf", strings.NewReader(c.conf))
		if err != nil {
			t.Fatal(err)
		}
		conf, err := FromRaw(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := conf.LockHold(); got != c.want {
			t.Errorf("%q: LockHold %v, want %v", c.conf, got, c.want)
		}
	}
	if _, err := FromRaw(&Raw{Lines: []Line{{{Key: "MessageTimeout", Value: "soon"}}}}); err == nil || !strings.Contains(err.Error(), "MessageTimeout=soon") {
		t.Errorf("MessageTimeout=soon: %v", err)
	}
}

// TestTRESWeights: TRESBillingWeights and PriorityWeightTRES as slurmctld
// reads them (slurm_protocol_api.c slurm_get_tres_weight_array,
// _tres_weight_item and get_convert_unit_val, derived by hand here): a
// unit divides by 1024 per step above the TRES's base unit (MB for memory
// and burst buffers, none for the rest), only its first letter counts, and
// a unit at or below the base leaves the weight alone; strtok_r skips
// empty entries and strtod takes a negative weight.
func TestTRESWeights(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]float64
	}{
		{"CPU=1.0,Mem=0.25G,GRES/gpu=2.0", map[string]float64{"cpu": 1, "mem": 0.25 / 1024, "gres/gpu": 2}},
		{"Mem=1T", map[string]float64{"mem": 1.0 / 1024 / 1024}},
		{"Mem=3M,BB=2K", map[string]float64{"mem": 3, "bb": 2}},
		{"Mem=0.5GB", map[string]float64{"mem": 0.5 / 1024}},
		{"CPU=2K", map[string]float64{"cpu": 2.0 / 1024}},
		{"license/matlab=4g", map[string]float64{"license/matlab": 4.0 / 1024 / 1024 / 1024}},
		{"cpu=.5e1", map[string]float64{"cpu": 5}},
		{"CPU=1,,Mem=1,", map[string]float64{"cpu": 1, "mem": 1}},
		{"CPU=-2", map[string]float64{"cpu": -2}},
	} {
		got, err := tresWeights(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.in, got, c.want)
		}
		for k, w := range c.want {
			if math.Abs(got[k]-w) > 1e-15*math.Abs(w) {
				t.Errorf("%s: %s = %g, want %g", c.in, k, got[k], w)
			}
		}
	}
	for _, in := range []string{"CPU", "CPU=", "=1", "CPU=x", "CPU=1X"} {
		_, err := tresWeights(in)
		if err == nil || !strings.Contains(err.Error(), "expected") {
			t.Errorf("%q: %v, want an error saying what was expected", in, err)
		}
	}
	// PriorityWeightTRES is read alike: before, its own parser refused the
	// units slurmctld takes
	fsys := fstest.MapFS{"slurm.conf": {Data: []byte("PriorityWeightTRES=CPU=1000,Mem=2G\n")}}
	if c, err := Load(fsys, "slurm.conf"); err != nil {
		t.Errorf("PriorityWeightTRES with a unit: %v", err)
	} else if w := c.Priority().WeightTRES; w["cpu"] != 1000 || w["mem"] != 2.0/1024 {
		t.Errorf("PriorityWeightTRES=CPU=1000,Mem=2G: %v, want cpu 1000, mem 2/1024", w)
	}
	raw, err := Parse("slurm.conf", strings.NewReader("PartitionName=p TRESBillingWeights=CPU=1Q\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromRaw(raw); err == nil || !strings.Contains(err.Error(), "slurm.conf:1") || !strings.Contains(err.Error(), "PartitionName=p") {
		t.Errorf("a bad weight: %v, want the file, line and partition named", err)
	}
}

// TestModTime: the latest change of slurm.conf or of a file it includes.
func TestModTime(t *testing.T) {
	old, recent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	fsys := fstest.MapFS{
		"slurm.conf": {Data: []byte("ClusterName=x\nInclude part.conf\n"), ModTime: old},
		"part.conf":  {Data: []byte("PartitionName=p TRESBillingWeights=CPU=2\n"), ModTime: recent},
	}
	c, err := Load(fsys, "slurm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !c.ModTime.Equal(recent) || c.Partitions[0].Billing["cpu"] != 2 {
		t.Errorf("mod time %v (want %v), billing %v", c.ModTime, recent, c.Partitions[0].Billing)
	}
}

// TestPartitionFactorDefault: a partition that sets no PriorityJobFactor
// or PriorityTier has 1 of each, as read_config.c gives it (sprio on real
// 22.05, 24.11 and 26.05 showed the partition factor 0.1 for such a
// partition beside one of 10: the site-shaped recordings' sprio.txt).
func TestPartitionFactorDefault(t *testing.T) {
	c, err := Load(fstest.MapFS{"slurm.conf": {Data: []byte("ClusterName=c\nPartitionName=cpu Nodes=n1\nPartitionName=debug Nodes=n1 PriorityJobFactor=10\n")}}, "slurm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Partitions) != 2 || c.Partitions[0].PriorityJobFactor != 1 || c.Partitions[0].PriorityTier != 1 || c.Partitions[1].PriorityJobFactor != 10 {
		t.Errorf("partitions %+v: want cpu's PriorityJobFactor and PriorityTier 1, debug's factor 10", c.Partitions)
	}
}
