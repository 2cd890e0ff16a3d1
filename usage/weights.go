package usage

import "time"

// Bucket is a rollup row's decayed contribution at At: spread evenly over
// its hour, day or month (local days and months, as slurmdbd rolls them),
// cut at the last hourly rollup and at the last reset.
func (in *Inputs) Bucket(u Row, p Period) float64 {
	return u.AllocSecs * in.cachedWeight(u.Start, p)
}

// bucketKey is a row's start and period: the rows of one hour, day or
// month weigh alike (Inputs.weights).
type bucketKey struct {
	start int64
	p     Period
}

func (in *Inputs) cachedWeight(start int64, p Period) float64 {
	k := bucketKey{start, p}
	w, ok := in.weights[k]
	if !ok {
		w = in.weight(start, p)
		if in.weights == nil {
			in.weights = map[bucketKey]float64{}
		}
		in.weights[k] = w
	}
	return w
}

// location is Location, the local zone where none is given.
func (in *Inputs) location() *time.Location {
	if in.Location == nil {
		return time.Local
	}
	return in.Location
}

// weight is what one alloc_sec of a row starting at start weighs at At
// (BucketUsage is linear in the amount): the row's usage spread evenly over
// its period, of which only the part after the reset and before the last
// rollup counts. A rolled-up period has ended by the last rollup, but not
// by the moment of check --at, whose last rollup is as of then
// (slurmdbd's LastRan.asOf).
func (in *Inputs) weight(start int64, p Period) float64 {
	from, to := float64(start), float64(p.End(start, in.location()))
	lo, hi := max(from, in.Since), min(to, float64(in.LastHourly))
	if hi <= lo {
		return 0
	}
	return in.Passes.BucketUsage(lo, hi, in.At, (hi-lo)/(to-from))
}

// rowWeight is what j's seconds in the rolled-up hours weigh at At per
// unit of count as the rows count them: each hour's row spread evenly
// over it (Bucket). The retimed partial hours weigh at their own time
// (retime), but retime charges that difference at jobTRES's rate already.
func (in *Inputs) rowWeight(j Job) float64 {
	hi := float64(in.LastHourly)
	if j.End != 0 {
		hi = min(hi, float64(j.End))
	}
	from, _ := Horizon(in.Passes, int64(in.At), int64(in.Since))
	lo := max(float64(j.Start), float64(from))
	w := 0.0
	for h := Hour.Start(int64(lo), in.location()); float64(h) < hi; h += 3600 {
		w += (min(hi, float64(h+3600)) - max(lo, float64(h))) * in.hourWeight(h)
	}
	return w
}

// hourWeight is cachedWeight(h, Hour), kept by the slot from the horizon's
// hour on, where the hours of rowWeight run one after the other.
func (in *Inputs) hourWeight(h int64) float64 {
	if in.hours == nil {
		from, _ := Horizon(in.Passes, int64(in.At), int64(in.Since))
		in.hoursBase = Hour.Start(from, in.location())
		in.hours = make([]float64, (in.LastHourly-in.hoursBase)/3600+2)
	}
	i := (h - in.hoursBase) / 3600
	if h < in.hoursBase || (h-in.hoursBase)%3600 != 0 || i >= int64(len(in.hours)) {
		return in.cachedWeight(h, Hour)
	}
	if in.hours[i] == 0 {
		in.hours[i] = in.cachedWeight(h, Hour)
	}
	return in.hours[i]
}
