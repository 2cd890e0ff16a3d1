package slurmconf

import (
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
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
	PriorityJobFactor  uint32
	PriorityTier       uint32
	Pos                Pos
}

// Config holds the settings that decide fairshare and job priority, with
// Slurm's defaults (read_config.c) where slurm.conf is silent.
type Config struct {
	ClusterName       string
	StateSaveLocation string
	PriorityType      string
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
	Partitions               []Partition
	// Pos tells where each setting above was read, by canonical key.
	Pos map[string]Pos
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
		Pos:                      map[string]Pos{},
	}
	for _, l := range raw.Lines {
		if p, ok := l.Get("PartitionName"); ok {
			if err := c.partition(l, p); err != nil {
				return nil, err
			}
			continue
		}
		if _, ok := l.Get("NodeName"); ok {
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
	case "prioritytype":
		c.PriorityType = v
	case "accountingstorageenforce":
		c.AccountingStorageEnforce = nil
		for _, e := range splitList(v) {
			e = strings.ToLower(e)
			switch e {
			case "associations", "limits", "qos", "safe", "wckeys", "nojobs", "nosteps", "all", "0", "none":
			default:
				return fmt.Errorf("unknown enforcement %q: expected associations, limits, qos, safe, wckeys, nojobs, nosteps or all", e)
			}
			c.AccountingStorageEnforce = append(c.AccountingStorageEnforce, e)
		}
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
		u := strings.ToUpper(v)
		switch u {
		case "NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY":
			c.PriorityUsageResetPeriod = u
		default:
			err = fmt.Errorf("expected NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY or YEARLY")
		}
	case "priorityfavorsmall":
		c.PriorityFavorSmall, err = yesNo(v)
	case "fairsharedampeningfactor":
		var n uint64
		n, err = strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			err = fmt.Errorf("expected an integer from 1 to 65535")
		}
		c.FairShareDampeningFactor = uint16(n)
	case "priorityweightage", "priorityweightassoc", "priorityweightfairshare", "priorityweightjobsize",
		"priorityweightpartition", "priorityweightqos":
		*c.weightField(key), err = weight(v)
	case "priorityweighttres":
		c.PriorityWeightTRES = v
	default:
		return nil // a setting that does not concern us
	}
	if err == nil {
		c.Pos[key] = s.Pos
	}
	return err
}

func (c *Config) weightField(key string) *uint32 {
	return map[string]*uint32{
		"priorityweightage":       &c.PriorityWeightAge,
		"priorityweightassoc":     &c.PriorityWeightAssoc,
		"priorityweightfairshare": &c.PriorityWeightFairshare,
		"priorityweightjobsize":   &c.PriorityWeightJobSize,
		"priorityweightpartition": &c.PriorityWeightPartition,
		"priorityweightqos":       &c.PriorityWeightQOS,
	}[key]
}

func (c *Config) flags(v string) error {
	c.PriorityFlags, c.PriorityFlagNames = FlagFairTree, nil
	for _, f := range splitList(v) {
		u := strings.ToUpper(f)
		bits, ok := flagNames[u]
		if !ok {
			if u == "TICKET_BASED" || u == "LEVEL_BASED" {
				return fmt.Errorf("flag %s was removed in Slurm 15.08", u)
			}
			return fmt.Errorf("unknown flag %q", f)
		}
		c.PriorityFlags |= bits
		c.PriorityFlagNames = append(c.PriorityFlagNames, u)
		// read_config.c: both NO_FAIR_TREE and DEPTH_OBLIVIOUS clear
		// FAIR_TREE.
		if u == "NO_FAIR_TREE" || u == "DEPTH_OBLIVIOUS" {
			c.PriorityFlags &^= FlagFairTree
		}
	}
	return nil
}

func (c *Config) partition(l Line, name Setting) error {
	p := Partition{Name: name.Value, Pos: name.Pos}
	for _, s := range l {
		var err error
		switch strings.ToLower(s.Key) {
		case "tresbillingweights":
			p.TRESBillingWeights = s.Value
		case "priorityjobfactor", "priority":
			p.PriorityJobFactor, err = weight(s.Value)
		case "prioritytier":
			p.PriorityTier, err = weight(s.Value)
		}
		if err != nil {
			return fmt.Errorf("%s: PartitionName=%s %s=%s: %w", s.Pos, p.Name, s.Key, s.Value, err)
		}
	}
	if strings.EqualFold(p.Name, "DEFAULT") {
		return nil
	}
	c.Partitions = append(c.Partitions, p)
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func yesNo(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "y", "1", "true":
		return true, nil
	case "no", "n", "0", "false":
		return false, nil
	}
	return false, fmt.Errorf("expected YES or NO")
}

func weight(v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("expected an integer from 0 to 4294967295")
	}
	return uint32(n), nil
}

// minutes parses a Slurm time string (src/common/parse_time.c
// time_str2secs: "min", "min:sec", "hr:min:sec", "days-hr",
// "days-hr:min", "days-hr:min:sec") and rounds it up to whole minutes as
// time_str2mins does.
func minutes(v string) (time.Duration, error) {
	secs, err := timeSeconds(v)
	if err != nil {
		return 0, err
	}
	return time.Duration((secs+59)/60) * time.Minute, nil
}

func timeSeconds(v string) (int64, error) {
	bad := fmt.Errorf("expected a time like 7-0, 14-00:00:00, 1:30:00 or minutes")
	if v == "" {
		return 0, bad
	}
	var days int64
	rest := v
	if d, r, ok := strings.Cut(v, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 32)
		if err != nil || n < 0 {
			return 0, bad
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, bad
	}
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return 0, bad
		}
		nums[i] = n
	}
	var h, m, s int64
	switch {
	case strings.Contains(v, "-"):
		// days-hr[:min[:sec]]
		h = nums[0]
		if len(nums) > 1 {
			m = nums[1]
		}
		if len(nums) > 2 {
			s = nums[2]
		}
	case len(nums) == 3:
		h, m, s = nums[0], nums[1], nums[2]
	case len(nums) == 2:
		m, s = nums[0], nums[1]
	default:
		m = nums[0]
	}
	total := days*86400 + h*3600 + m*60 + s
	if total > math.MaxInt32 {
		return 0, bad
	}
	return total, nil
}
