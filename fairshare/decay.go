package fairshare

import "math"

// Passes describes slurmctld's decay passes (priority_multifactor.c
// _decay_thread): every Period seconds, at a fixed phase, it multiplies all
// usage by d^(seconds since the last pass), with d = 1 - 0.693/HalfLife
// (_init_decay_vars: a first-order approximation, not 2^(-1/HalfLife)),
// then charges each running job Δ·d^Δ·billable for the Δ seconds since the
// last pass or the job's start (_apply_new_usage). Raw usage changes only
// at passes, and usage counts as if it happened at the start of its pass
// interval.
type Passes struct {
	// HalfLife is PriorityDecayHalfLife in seconds; 0: no decay.
	HalfLife float64
	// Period is PriorityCalcPeriod in seconds (> 0).
	Period float64
	// Phase is the time of any one pass (unix seconds), e.g. read from
	// priority_last_decay_ran; passes are Phase + k·Period.
	Phase float64
	// ChargeJobEnd: with AccountingStorageEnforce=limits (or safe),
	// priority_p_job_end charges a finished job's last partial interval
	// when it ends; otherwise that interval is never charged.
	ChargeJobEnd bool
	// LockWait is how long after a pass's moment (its start_time, which
	// priority_last_decay_ran records) slurmctld may take to reach the
	// jobs, in seconds: it decays usage, then waits for the job write
	// lock, which the scheduler holds for up to a couple of seconds at a
	// time. Without ChargeJobEnd a job that ends in between is found
	// ended and not charged its last interval, though it ran past the
	// pass; the database cannot tell (0: not considered).
	LockWait float64
}

// D is the per-second decay factor.
func (p Passes) D() float64 {
	if p.HalfLife <= 0 {
		return 1
	}
	return 1 - 0.693/p.HalfLife
}

// LastPass is the last pass at or before t.
func (p Passes) LastPass(t float64) float64 {
	return p.Phase + math.Floor((t-p.Phase)/p.Period)*p.Period
}

// pow is d^t.
func (p Passes) pow(t float64) float64 { return math.Pow(p.D(), t) }

// JobUsage is what a job with the given billable (times its QOS
// UsageFactor) running from start to end (0: still running) has added to
// raw usage as it stands at time at, that is after the last pass at or
// before at.
func (p Passes) JobUsage(start, end, at, billable float64) float64 {
	return p.JobUsageIn(start, end, start, math.Inf(1), at, billable)
}

// JobUsageIn is the part of JobUsage that the job's seconds in [from, to)
// make up. slurmctld charges a running job at each pass for the Δ seconds
// since the last pass or its start, Δ·d^Δ, and with ChargeJobEnd its last
// Δ when it ends, decayed from the pass before by the next; a charge is
// shared evenly by the seconds it covers, so the parts of a job add up to
// it whole. It walks the passes of [from, to) only: a rolled-up hour of a
// long job costs at most an hour's passes.
func (p Passes) JobUsageIn(start, end, from, to, at, billable float64) float64 {
	now := p.LastPass(at)
	running := end == 0 || end > at
	if running {
		to = min(to, now)
	} else {
		to = min(to, end)
	}
	from = max(from, start)
	if to <= from {
		return 0
	}
	total := 0.0
	for pass := p.LastPass(from) + p.Period; ; pass += p.Period {
		// the charge at this pass: [a, b) weighing w a second at now
		a, b, w := max(start, pass-p.Period), pass, 0.0
		switch {
		case pass <= now && (running || pass <= end):
			w = p.pow(pass-a) * p.pow(now-pass)
		case !running && p.ChargeJobEnd:
			b = end
			w = p.pow(end-a) * p.pow(now-p.LastPass(end))
		default:
			// the last interval of a job that ended, never charged
			return total * billable
		}
		total += w * (min(b, to) - max(a, from))
		if b >= to {
			return total * billable
		}
	}
}

// BucketUsage is what amount (billing-seconds) spread evenly over [from,
// to) has added to raw usage as it stands at time at, as if one job ran
// through the bucket: a rollup row, whose timing inside the hour the
// database does not keep. Usage after the last pass at or before at is not
// charged yet. Treating the bucket as one job gives each pass interval
// d^P instead of d^Δ for the part inside the bucket: a relative error
// below 0.693·Period/HalfLife on the bucket's two edge intervals.
func (p Passes) BucketUsage(from, to, at, amount float64) float64 {
	now := p.LastPass(at)
	if to <= from || amount == 0 {
		return 0
	}
	rate := amount / (to - from)
	// Weight of a second in the pass interval (q-P, q], charged at q:
	// d^P·d^(now-q) = d^(now-q+P); nothing after now.
	end := math.Min(to, now)
	if end <= from {
		return 0
	}
	total := 0.0
	first := p.LastPass(from) + p.Period // charge of [from, first)
	if first >= end {
		return rate * (end - from) * p.pow(now-first+p.Period)
	}
	total += (first - from) * p.pow(now-first+p.Period)
	// Full intervals [first + jP, first + (j+1)P) inside [first, end).
	n := math.Floor((end - first) / p.Period)
	if n > 0 {
		// Σ_{j=0..n-1} P·d^(now - (first + (j+1)P) + P) = P·d^(now-first)·Σ d^(-jP)
		// written with the last one as reference to keep exponents >= 0.
		lastStart := first + (n-1)*p.Period
		total += p.Period * p.pow(now-lastStart) * geometric(p.pow(p.Period), n)
	}
	// The partial interval at the end, charged at its pass.
	if tail := first + n*p.Period; end > tail {
		total += (end - tail) * p.pow(now-tail)
	}
	return rate * total
}

// geometric is Σ_{j=0..n-1} r^j.
func geometric(r, n float64) float64 {
	if r == 1 {
		return n
	}
	return (1 - math.Pow(r, n)) / (1 - r)
}
