package usage

import "math"

// retime is what a job's seconds in partial rolled-up hours (the hour it
// started in, the hour it ended in) weigh at their own time, as slurmctld
// charged them (JobUsageIn), rather than spread over the hour with the
// rest of the row, per unit of count. A full hour of the job is its row's
// spread already. Without it, right after each rollup the minutes a
// running job had before it would weigh as if at the middle of the hour:
// with a one-hour half-life a quarter less than slurmctld charged
// (TestRetimedPartialHours). Spread as one job in the bucket
// (BucketUsage) instead, a 4-minute job's usage would be 1.7% above
// slurmctld's at a 10-minute half-life. Hours before HoursFrom are frozen
// as spread: by then the difference is at most 0.35·3600/HalfLife of an
// hour's usage, decayed by the six hours of slurmdbd.DefaultReread.
func (in *Inputs) retime(j Job) float64 {
	r := 0.0
	for _, h := range in.retimedHours(j) {
		r += in.retimeHour(h, j)
	}
	return r
}

// retimedHours are the rolled-up hours retime moves j's seconds in: the
// one it started in and the one it ran in last before the last rollup,
// from HoursFrom on.
func (in *Inputs) retimedHours(j Job) []int64 {
	end := float64(in.LastHourly)
	if j.End != 0 {
		end = min(end, float64(j.End))
	}
	if end <= float64(j.Start) {
		return nil
	}
	var hours []int64
	first := Hour.Start(j.Start, in.location())
	if float64(first) >= in.HoursFrom {
		hours = append(hours, first)
	}
	if last := Hour.Start(int64(math.Ceil(end))-1, in.location()); last != first && float64(last) >= in.HoursFrom {
		hours = append(hours, last)
	}
	return hours
}

// retimeHour is retime for j's seconds in the rolled-up hour beginning at
// h.
func (in *Inputs) retimeHour(h int64, j Job) float64 {
	from, to := max(float64(j.Start), float64(h)), float64(min(h+3600, in.LastHourly))
	if j.End != 0 {
		to = min(to, float64(j.End))
	}
	if to <= from {
		return 0
	}
	own := in.Passes.JobUsageIn(float64(j.Start), float64(j.End), max(from, in.Since), to, in.At, 1)
	return own - (to-from)*in.cachedWeight(h, Hour)
}
