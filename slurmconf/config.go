package slurmconf

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
)

// Priority flags (slurm/slurm.h PRIORITY_FLAGS_*).
const (
	FlagAccrueAlways uint32 = 1 << iota
	FlagMaxTRES
	FlagSizeRelative
	FlagDepthOblivious
	FlagCalculateRunning
	FlagFairTree
	FlagIncrOnly
	FlagNoNormalAssoc
	FlagNoNormalPart
	FlagNoNormalQOS
	FlagNoNormalTRES
	FlagMaxTRESGRES
)

var flagNames = map[string]uint32{
	"ACCRUE_ALWAYS":          FlagAccrueAlways,
	"MAX_TRES":               FlagMaxTRES,
	"MAX_TRES_GRES":          FlagMaxTRESGRES,
	"SMALL_RELATIVE_TO_TIME": FlagSizeRelative,
	"DEPTH_OBLIVIOUS":        FlagDepthOblivious,
	"CALCULATE_RUNNING":      FlagCalculateRunning,
	"INCR_ONLY":              FlagIncrOnly,
	"NO_NORMAL_ASSOC":        FlagNoNormalAssoc,
	"NO_NORMAL_PART":         FlagNoNormalPart,
	"NO_NORMAL_QOS":          FlagNoNormalQOS,
	"NO_NORMAL_TRES":         FlagNoNormalTRES,
	"NO_NORMAL_ALL":          FlagNoNormalAssoc | FlagNoNormalPart | FlagNoNormalQOS | FlagNoNormalTRES,
	"FAIR_TREE":              0, // the default; accepted
	"NO_FAIR_TREE":           0, // clears FlagFairTree below
}

// Partition is what a PartitionName line says about priority.
type Partition struct {
	Name               string
	TRESBillingWeights string
	// Billing is TRESBillingWeights by lower-case TRES name (cpu, mem,
	// gres/gpu), each weight per the TRES's base unit (memory: per MB), as
	// slurmctld converts it; nil: none, and jobs are billed their CPUs.
	Billing           map[string]float64
	PriorityJobFactor uint32
	PriorityTier      uint32
	// Nodes as written; "ALL" or empty: every node.
	Nodes string
	// MaxTime in minutes; Infinite unless set.
	MaxTime uint32
	Pos     Pos
}

// Infinite is Slurm's INFINITE for 32-bit values.
const Infinite = priority.Infinite

// Config holds the settings that decide fairshare and job priority, with
// Slurm's defaults (read_config.c) where slurm.conf is silent.
type Config struct {
	ClusterName       string
	StateSaveLocation string
	// SlurmctldPidFile is where slurmctld writes its pid
	// (/var/run/slurmctld.pid by default).
	SlurmctldPidFile string
	PriorityType     string
	// AccountingStorageEnforce, lower-case.
	AccountingStorageEnforce []string
	// PriorityFlags as bits and as written.
	PriorityFlags     uint32
	PriorityFlagNames []string
	// PriorityDecayHalfLife and PriorityCalcPeriod are stored in whole
	// minutes by Slurm (time_str2mins rounds up); 0 half-life: no decay.
	PriorityDecayHalfLife    time.Duration
	PriorityCalcPeriod       time.Duration
	PriorityUsageResetPeriod string
	PriorityMaxAge           time.Duration
	PriorityFavorSmall       bool
	FairShareDampeningFactor uint16
	PriorityWeightAge        uint32
	PriorityWeightAssoc      uint32
	PriorityWeightFairshare  uint32
	PriorityWeightJobSize    uint32
	PriorityWeightPartition  uint32
	PriorityWeightQOS        uint32
	PriorityWeightTRES       string
	weightTRES               map[string]float64
	// MessageTimeout in seconds (default 10), and SchedulerParameters'
	// max_sched_time and bf_yield_interval (0: not set): LockHold.
	MessageTimeout  int
	maxSchedTime    int
	bfYieldInterval time.Duration
	Partitions      []Partition
	// Nodes are the NodeName lines' nodes.
	Nodes            []string
	partitionDefault Partition
	// Pos tells where each setting above was read, by canonical key.
	Pos map[string]Pos
	// ModTime is when slurm.conf or a file it includes last changed
	// (zero: not read from files): slurmctld cannot have applied a
	// setting before it was written.
	ModTime time.Time
}

// Algorithm is the fairshare algorithm the flags select.
func (c *Config) Algorithm() fairshare.Algorithm {
	switch {
	case c.PriorityFlags&FlagDepthOblivious != 0:
		return fairshare.AlgorithmDepthOblivious
	case c.PriorityFlags&FlagFairTree == 0:
		return fairshare.AlgorithmClassic
	}
	return fairshare.AlgorithmFairTree
}

// EnforceLimits reports AccountingStorageEnforce with limits (or safe,
// which implies it): only then does slurmctld charge a finished job's last
// partial decay pass (priority_p_job_end via acct_policy.c).
func (c *Config) EnforceLimits() bool {
	for _, e := range c.AccountingStorageEnforce {
		if e == "limits" || e == "safe" || e == "all" {
			return true
		}
	}
	return false
}

// LockHold is how long slurmctld's schedulers hold the job write lock at a
// time, which a decay pass waits for before it looks at the jobs
// (fairshare.Passes.LockWait): the main scheduler's max_sched_time, as
// job_scheduler.c reads it (at most MessageTimeout/2, by default
// min(max(MessageTimeout/2, 1), 2) s), or the backfill scheduler's
// bf_yield_interval (2 s by default), whichever is longer.
func (c *Config) LockHold() time.Duration {
	half := c.MessageTimeout / 2
	sched := c.maxSchedTime
	if sched <= 0 || sched > half {
		sched = min(max(half, 1), 2)
	}
	bf := c.bfYieldInterval
	if bf <= 0 {
		bf = 2 * time.Second
	}
	return max(time.Duration(sched)*time.Second, bf)
}

// Load reads path (and its Includes) from fsys.
func Load(fsys fs.FS, path string) (*Config, error) {
	raw, err := ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	return FromRaw(raw)
}

// FromRaw interprets parsed lines.
func FromRaw(raw *Raw) (*Config, error) {
	c := &Config{
		PriorityType:             "priority/basic",
		PriorityFlags:            FlagFairTree,
		PriorityDecayHalfLife:    7 * 24 * time.Hour,
		PriorityCalcPeriod:       5 * time.Minute,
		PriorityUsageResetPeriod: "NONE",
		PriorityMaxAge:           7 * 24 * time.Hour,
		FairShareDampeningFactor: 1,
		MessageTimeout:           10,
		SlurmctldPidFile:         "/var/run/slurmctld.pid",
		Pos:                      map[string]Pos{},
		// read_config.c: a partition's PriorityJobFactor and PriorityTier
		// are 1 unless set
		partitionDefault: Partition{MaxTime: Infinite, PriorityJobFactor: 1, PriorityTier: 1},
		ModTime:          raw.ModTime,
	}
	for _, l := range raw.Lines {
		if p, ok := l.Get("PartitionName"); ok {
			if err := c.partition(l, p); err != nil {
				return nil, err
			}
			continue
		}
		if n, ok := l.Get("NodeName"); ok {
			if !strings.EqualFold(n.Value, "DEFAULT") {
				names, err := Hostlist(n.Value)
				if err != nil {
					return nil, fmt.Errorf("%s: NodeName=%s: %w", n.Pos, n.Value, err)
				}
				c.Nodes = append(c.Nodes, names...)
			}
			continue
		}
		for _, s := range l {
			if err := c.set(s); err != nil {
				return nil, fmt.Errorf("%s: %s=%s: %w", s.Pos, s.Key, s.Value, err)
			}
		}
	}
	return c, nil
}

func (c *Config) set(s Setting) error {
	key := strings.ToLower(s.Key)
	v := s.Value
	var err error
	switch key {
	case "clustername":
		c.ClusterName = strings.ToLower(v)
	case "statesavelocation":
		c.StateSaveLocation = v
	case "slurmctldpidfile":
		c.SlurmctldPidFile = v
	case "prioritytype":
		c.PriorityType = v
	case "accountingstorageenforce":
		c.AccountingStorageEnforce, err = enforcement(v)
	case "priorityflags":
		err = c.flags(v)
	case "prioritydecayhalflife":
		c.PriorityDecayHalfLife, err = minutes(v)
	case "prioritycalcperiod":
		c.PriorityCalcPeriod, err = minutes(v)
		if err == nil && c.PriorityCalcPeriod <= 0 {
			err = fmt.Errorf("expected at least one minute")
		}
	case "prioritymaxage":
		c.PriorityMaxAge, err = minutes(v)
	case "priorityusageresetperiod":
		var u string
		if u, err = resetPeriod(v); err == nil {
			c.PriorityUsageResetPeriod = u
		}
	case "priorityfavorsmall":
		c.PriorityFavorSmall, err = yesNo(v)
	case "fairsharedampeningfactor":
		c.FairShareDampeningFactor, err = dampening(v)
	case "priorityweightage", "priorityweightassoc", "priorityweightfairshare", "priorityweightjobsize",
		"priorityweightpartition", "priorityweightqos":
		*c.weightField(key), err = weight(v)
	case "priorityweighttres":
		c.PriorityWeightTRES = v
		c.weightTRES, err = tresWeights(v)
	case "messagetimeout":
		c.MessageTimeout, err = strconv.Atoi(v)
		if err != nil || c.MessageTimeout <= 0 {
			err = fmt.Errorf("expected a positive number of seconds")
		}
	case "schedulerparameters":
		c.maxSchedTime, c.bfYieldInterval = schedulerParameters(v)
	default:
		return nil // a setting that does not concern us
	}
	if err == nil {
		c.Pos[key] = s.Pos
	}
	return err
}

// Priority is what slurm.conf says of job priority, for package priority.
func (c *Config) Priority() priority.Config {
	f := c.PriorityFlags
	p := priority.Config{
		MaxAge:              int64(c.PriorityMaxAge / time.Second),
		FavorSmall:          c.PriorityFavorSmall,
		AccrueAlways:        f&FlagAccrueAlways != 0,
		SmallRelativeToTime: f&FlagSizeRelative != 0,
		NoNormalAssoc:       f&FlagNoNormalAssoc != 0,
		NoNormalPart:        f&FlagNoNormalPart != 0,
		NoNormalQOS:         f&FlagNoNormalQOS != 0,
		NoNormalTRES:        f&FlagNoNormalTRES != 0,
		EnforceLimits:       c.EnforceLimits(),
	}
	p.Weights[priority.Age] = float64(c.PriorityWeightAge)
	p.Weights[priority.Assoc] = float64(c.PriorityWeightAssoc)
	p.Weights[priority.FairShare] = float64(c.PriorityWeightFairshare)
	p.Weights[priority.JobSize] = float64(c.PriorityWeightJobSize)
	p.Weights[priority.Partition] = float64(c.PriorityWeightPartition)
	p.Weights[priority.QOS] = float64(c.PriorityWeightQOS)
	p.WeightTRES = c.weightTRES
	for _, w := range c.weightTRES {
		p.Weights[priority.TRES] += w
	}
	return p
}
