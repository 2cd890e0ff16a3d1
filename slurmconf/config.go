package slurmconf

import (
	"fmt"
	"io/fs"
	"math"
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

// enforcement is AccountingStorageEnforce's list, lower-case, as far as
// it is known.
func enforcement(v string) ([]string, error) {
	var out []string
	for _, e := range splitList(v) {
		e = strings.ToLower(e)
		switch e {
		case "associations", "limits", "qos", "safe", "wckeys", "nojobs", "nosteps", "all", "0", "none":
		default:
			return out, fmt.Errorf("unknown enforcement %q: expected associations, limits, qos, safe, wckeys, nojobs, nosteps or all", e)
		}
		out = append(out, e)
	}
	return out, nil
}

// resetPeriod is PriorityUsageResetPeriod, upper-case.
func resetPeriod(v string) (string, error) {
	u := strings.ToUpper(v)
	switch u {
	case "NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY":
		return u, nil
	}
	return "", fmt.Errorf("expected NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY or YEARLY")
}

// dampening is FairShareDampeningFactor: 1 to 65535.
func dampening(v string) (uint16, error) {
	n, err := strconv.ParseUint(v, 10, 16)
	if err != nil || n == 0 {
		err = fmt.Errorf("expected an integer from 1 to 65535")
	}
	return uint16(n), err
}

// schedulerParameters are SchedulerParameters' max_sched_time (seconds)
// and bf_yield_interval (microseconds), 0 where not set; the last of
// each wins.
func schedulerParameters(v string) (maxSchedTime int, bfYieldInterval time.Duration) {
	for _, p := range splitList(v) {
		k, n, _ := strings.Cut(p, "=")
		switch strings.ToLower(k) {
		case "max_sched_time":
			maxSchedTime, _ = strconv.Atoi(n)
		case "bf_yield_interval":
			us, _ := strconv.Atoi(n)
			bfYieldInterval = time.Duration(us) * time.Microsecond
		}
	}
	return maxSchedTime, bfYieldInterval
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

// partition reads a PartitionName line; PartitionName=DEFAULT sets what
// the lines after it leave out.
func (c *Config) partition(l Line, name Setting) error {
	p := c.partitionDefault
	p.Name, p.Pos = name.Value, name.Pos
	for _, s := range l {
		var err error
		switch strings.ToLower(s.Key) {
		case "tresbillingweights":
			p.TRESBillingWeights = s.Value
			p.Billing, err = tresWeights(s.Value)
		case "priorityjobfactor", "priority":
			p.PriorityJobFactor, err = weight(s.Value)
		case "prioritytier":
			p.PriorityTier, err = weight(s.Value)
		case "nodes":
			p.Nodes = s.Value
		case "maxtime":
			p.MaxTime, err = maxTime(s.Value)
		}
		if err != nil {
			return fmt.Errorf("%s: PartitionName=%s %s=%s: %w", s.Pos, p.Name, s.Key, s.Value, err)
		}
	}
	if strings.EqualFold(p.Name, "DEFAULT") {
		c.partitionDefault = p
		return nil
	}
	c.Partitions = append(c.Partitions, p)
	return nil
}

// maxTime is a partition's MaxTime in minutes: INFINITE or UNLIMITED, or
// a Slurm time string.
func maxTime(v string) (uint32, error) {
	switch strings.ToUpper(v) {
	case "INFINITE", "UNLIMITED":
		return Infinite, nil
	}
	d, err := minutes(v)
	return uint32(d / time.Minute), err
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

// tresWeights parses TRESBillingWeights and PriorityWeightTRES
// ("CPU=1.0,Mem=0.25G,GRES/gpu=2") into weights by lower-case TRES name, as
// tres_table names them. slurmctld reads both with one function
// (slurm_protocol_api.c, slurm_get_tres_weight_array and
// _tres_weight_item): empty entries are skipped; a weight is a number,
// negative too, with an optional unit, of which only the first letter
// counts; for memory and burst buffers, whose base unit is the MB, G means
// per GB (the weight divided by 1024) and T per TB, while K and M leave it
// as written; for every other TRES K, M, G, T and P divide by powers of
// 1024 from the unit.
func tresWeights(v string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, f := range splitList(v) {
		k, w, ok := strings.Cut(f, "=")
		if !ok || k == "" || w == "" {
			return nil, fmt.Errorf("entry %q: expected TRES=weight", f)
		}
		end := strings.IndexFunc(w, func(r rune) bool { return !strings.ContainsRune("0123456789.+-eE", r) })
		if end < 0 {
			end = len(w)
		}
		n, err := strconv.ParseFloat(w[:end], 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, fmt.Errorf("entry %q: expected TRES=weight with a number", f)
		}
		if end < len(w) {
			unit := strings.IndexByte("KMGTP", w[end]&^0x20) + 1
			if unit == 0 {
				return nil, fmt.Errorf("entry %q: unit %q: expected K, M, G, T or P", f, w[end:end+1])
			}
			base := 0
			if typ, _, _ := strings.Cut(strings.ToLower(k), "/"); typ == "mem" || typ == "bb" {
				base = 2
			}
			for ; unit > base; unit-- {
				n /= 1024
			}
		}
		out[strings.ToLower(k)] = n
	}
	return out, nil
}

// AllNodes reports whether a partition holds every node slurm.conf
// defines (Nodes=ALL, or a list naming them all): its TRES are then the
// cluster's.
func (c *Config) AllNodes(p Partition) bool {
	if strings.EqualFold(p.Nodes, "ALL") {
		return true
	}
	names, err := Hostlist(p.Nodes)
	if err != nil || len(c.Nodes) == 0 {
		return false
	}
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	for _, n := range c.Nodes {
		if !in[n] {
			return false
		}
	}
	return true
}

// Hostlist expands a Slurm host list ("n[01-04,7],gpu1"); ranges keep
// their zero padding.
func Hostlist(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		// one entry: up to a comma outside brackets
		depth, end := 0, len(s)
		for i, r := range s {
			if r == '[' {
				depth++
			} else if r == ']' {
				depth--
			} else if r == ',' && depth == 0 {
				end = i
				break
			}
		}
		entry := s[:end]
		s = strings.TrimPrefix(s[end:], ",")
		open := strings.IndexByte(entry, '[')
		if open < 0 {
			if entry != "" {
				out = append(out, entry)
			}
			continue
		}
		close := strings.IndexByte(entry, ']')
		if close < open || close != len(entry)-1 {
			return nil, fmt.Errorf("host list entry %q: expected prefix[ranges]", entry)
		}
		prefix := entry[:open]
		for _, r := range strings.Split(entry[open+1:close], ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || b < a || b-a > 1<<20 {
				return nil, fmt.Errorf("host list entry %q: range %q: expected N or N-M with N <= M", entry, r)
			}
			for i := a; i <= b; i++ {
				out = append(out, fmt.Sprintf("%s%0*d", prefix, len(lo), i))
			}
		}
	}
	return out, nil
}
