package slurmconf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

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
