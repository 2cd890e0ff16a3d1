package fairshare

import (
	"fmt"
	"math"
)

// Maui/Moab fairshare (Maui Scheduler Administrator's Guide, section 6.3), a
// what-if view: usage is a decay-weighted average over FSDEPTH windows of
// FSINTERVAL each, compared with a target.

// MauiConfig holds the system-level fairshare parameters of Maui.
type MauiConfig struct {
	// Depth is FSDEPTH, the number of windows counted (window 0 is the
	// current one).
	Depth int
	// Decay is FSDECAY, the weight of window N is Decay^N; 1 means none.
	Decay float64
	// Ratio is the '%' suffix of FSPOLICY: the component is
	// 1 - usage/target instead of target - usage.
	Ratio bool
}

// Validate reports a configuration Maui would not accept.
func (c MauiConfig) Validate() error {
	if c.Depth < 1 {
		return fmt.Errorf("maui FSDEPTH %d: expected at least 1", c.Depth)
	}
	if !(c.Decay > 0 && c.Decay <= 1) {
		return fmt.Errorf("maui FSDECAY %v: expected a number in (0, 1]", c.Decay)
	}
	return nil
}

// MauiUsage is the current fairshare usage of one credential:
// Σ Decay^N·used[N] / Σ Decay^N·total[N] over the first Depth windows,
// newest first. Windows beyond the data count as empty. 0 when nothing was
// delivered.
func MauiUsage(used, total []float64, c MauiConfig) float64 {
	num, den, w := 0.0, 0.0, 1.0
	for k := 0; k < c.Depth; k++ {
		if k < len(used) {
			num += w * used[k]
		}
		if k < len(total) {
			den += w * total[k]
		}
		w *= c.Decay
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// TargetKind is how a Maui fairshare target acts.
type TargetKind int

const (
	// Target adjusts priority both ways (FSTARGET=N).
	Target TargetKind = iota
	// Cap only lowers priority when usage is above it (FSTARGET=N-).
	Cap
	// Floor only raises priority when usage is below it (FSTARGET=N+).
	Floor
)

// MauiComponent is the fairshare priority component of a credential with
// the given usage and target, both fractions of the delivered resources:
// target - usage (difference policy) or 1 - usage/target (ratio policy),
// kept to the sign a cap or floor allows. NaN for a ratio against a zero
// target.
func MauiComponent(usage, target float64, kind TargetKind, c MauiConfig) float64 {
	var d float64
	if c.Ratio {
		if target == 0 {
			return math.NaN()
		}
		d = 1 - usage/target
	} else {
		d = target - usage
	}
	switch kind {
	case Cap:
		d = math.Min(d, 0)
	case Floor:
		d = math.Max(d, 0)
	}
	return d
}
