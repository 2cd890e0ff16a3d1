package slurmconf

import (
	"fmt"
	"strconv"
	"strings"
)

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
