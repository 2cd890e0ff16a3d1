package slurmconf

import "github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"

// Passes is how slurmctld decays usage under these settings: the
// period, half-life, whether a job's end is charged at once, and how long
// a pass waits for the schedulers' lock. The phase is not a setting: 0
// (unknown) until the state file or the reads give it.
func (c *Config) Passes() fairshare.Passes {
	return fairshare.Passes{HalfLife: c.PriorityDecayHalfLife.Seconds(), Period: c.PriorityCalcPeriod.Seconds(),
		ChargeJobEnd: c.EnforceLimits(), LockWait: c.LockHold().Seconds()}
}

// ResetsUsage reports whether PriorityUsageResetPeriod clears all usage
// periodically: a fall of RawUsage may then be the reset, and the
// rebuild counts usage only since the last one.
func (c *Config) ResetsUsage() bool { return c.PriorityUsageResetPeriod != "NONE" }
