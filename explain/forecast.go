package explain

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// The moments the forecast shows.
var forecastAfter = []time.Duration{0, time.Hour, 6 * time.Hour, 24 * time.Hour, 3 * 24 * time.Hour, 7 * 24 * time.Hour}

// ForecastPoint is the factor at one moment of the forecast.
type ForecastPoint struct {
	After    string    `json:"after"`
	At       time.Time `json:"at"`
	Factor   drift.Num `json:"factor"`
	Rank     int32     `json:"rank,omitempty"`
	RawUsage float64   `json:"raw_usage"`
}

// ForecastExplanation is the recovery forecast of one association.
type ForecastExplanation struct {
	Algorithm   string          `json:"algorithm"`
	Assumptions []string        `json:"assumptions"`
	Window      string          `json:"window"`
	Points      []ForecastPoint `json:"points"`
	Threshold   drift.Num       `json:"threshold"`
	// ThresholdRank is the Fair Tree rank at the threshold (0: classic).
	ThresholdRank int32 `json:"threshold_rank,omitempty"`
	// ThresholdFrom: "fair_level" (usage matching shares) or "flag".
	ThresholdFrom string `json:"threshold_from"`
	// Direction is "rises" (from below) or "falls" (from at or above).
	Direction string `json:"direction"`
	// Crossing is the first pass past the threshold within Horizon (null:
	// none); CrossingSeconds is how long from now.
	Crossing        *time.Time `json:"crossing"`
	CrossingSeconds *float64   `json:"crossing_seconds"`
	Horizon         string     `json:"horizon"`
	Summary         string     `json:"summary"`
}

// Forecast is the recovery forecast of tree association i (user user)
// under the default assumption; threshold 0 is the association's fair
// level. extra are moments to show besides forecastAfter's.
func Forecast(in *build.Inputs, i int, user string, threshold float64, extra ...time.Duration) (*ForecastExplanation, error) {
	f := in.Forecast().Quiet(i)
	t := in.Tree
	users := float64(t.Users())
	x := &ForecastExplanation{Algorithm: string(f.Algorithm), Window: humanDuration(in.ForecastWindow), Horizon: humanDuration(build.RecoveryHorizon), ThresholdFrom: "flag"}
	jobs := len(f.Jobs)
	x.Assumptions = []string{
		fmt.Sprintf("%s submits no new jobs", user),
		fmt.Sprintf("its running jobs (%d) run to their time limit, one without a limit for good", jobs),
		fmt.Sprintf("every other association keeps using the cluster at the larger of its rate over the last %s of rolled-up usage and what its running jobs commit (their billing until each one's time limit)", x.Window),
		"shares stay as they are and no usage reset comes",
	}
	after := append(slices.Clone(forecastAfter), extra...)
	slices.Sort(after)
	for _, d := range slices.Compact(after) {
		at := f.At + d.Seconds()
		vals, err := f.Values(at)
		if err != nil {
			return nil, err
		}
		after := "now"
		if d > 0 {
			after = "+" + shortDuration(d)
		}
		x.Points = append(x.Points, ForecastPoint{After: after, At: time.Unix(int64(at), 0).UTC(), Factor: drift.Num(vals[i].FairShare), Rank: vals[i].Rank, RawUsage: vals[i].RawUsage})
	}
	if threshold == 0 {
		fair, err := t.FairLevel(i, f.Algorithm, f.Dampening)
		if err != nil {
			return nil, err
		}
		threshold, x.ThresholdFrom = fair.FairShare, "fair_level"
		x.ThresholdRank = fair.Rank
	} else if f.Algorithm == fairshare.AlgorithmFairTree {
		x.ThresholdRank = int32(math.Ceil(threshold * users))
	}
	x.Threshold = drift.Num(threshold)
	cs, err := f.Crossings([]int{i}, []float64{threshold}, build.RecoveryHorizon.Seconds(), build.RecoveryStep.Seconds())
	if err != nil {
		return nil, err
	}
	c := cs[0]
	x.Direction = "falls"
	if c.Rising {
		x.Direction = "rises"
	}
	cond := fmt.Sprintf("with no new jobs from %s, and the others using the cluster as over the last %s or as their running jobs commit, whichever is more", user, x.Window)
	now := x.Points[0].Factor
	switch {
	case math.IsNaN(float64(now)) || math.IsNaN(threshold):
		x.Summary = fmt.Sprintf("%s's association has no factor of its own under %s: nothing to forecast.", user, f.Algorithm)
	case c.Found:
		at := time.Unix(int64(c.At), 0).UTC()
		secs := c.At - f.At
		x.Crossing, x.CrossingSeconds = &at, &secs
		verb := "passes"
		if !c.Rising {
			verb = "falls below"
		}
		x.Summary = fmt.Sprintf("%s, %s's factor %s %s in about %s.", cond, user, verb, num4(threshold), aboutDuration(secs))
	case c.Rising:
		x.Summary = fmt.Sprintf("%s, %s's factor (%s now) does not reach %s within %s.", cond, user, num4(float64(now)), num4(threshold), x.Horizon)
	default:
		x.Summary = fmt.Sprintf("%s, %s's factor (%s now) stays at or above %s for at least %s.", cond, user, num4(float64(now)), num4(threshold), x.Horizon)
	}
	return x, nil
}

// num4 prints a factor in a sentence: four significant digits.
func num4(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// shortDuration: 5m, 1h, 6h, 1d, 3d, 7d (90s as Go prints it).
func shortDuration(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// aboutDuration rounds to the two largest units a reader needs: 2 days 4
// hours, 3 hours 10 minutes, 25 minutes.
func aboutDuration(secs float64) string {
	m := int64(math.Round(secs / 60))
	d, h, mm := m/1440, m%1440/60, m%60
	unit := func(n int64, s string) string {
		if n == 1 {
			return "1 " + s
		}
		return fmt.Sprintf("%d %ss", n, s)
	}
	switch {
	case d > 0 && h > 0:
		return unit(d, "day") + " " + unit(h, "hour")
	case d > 0:
		return unit(d, "day")
	case h > 0 && mm > 0:
		return unit(h, "hour") + " " + unit(mm, "minute")
	case h > 0:
		return unit(h, "hour")
	}
	return unit(mm, "minute")
}

// WriteTable prints the forecast as explain's table.
func (x *ForecastExplanation) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "forecast (%s):\n", x.Algorithm)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "after\tat\tfactor\trank\traw usage\t")
	for _, p := range x.Points {
		rank := ""
		if p.Rank > 0 {
			rank = fmt.Sprint(p.Rank)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t\n", p.After, p.At.Format(time.RFC3339), num(p.Factor), rank, p.RawUsage)
	}
	tw.Flush()
	from := "its fair level (usage matching its shares)"
	if x.ThresholdFrom == "flag" {
		from = "--forecast"
	}
	fmt.Fprintf(w, "threshold %s from %s", num(x.Threshold), from)
	if x.ThresholdRank > 0 {
		fmt.Fprintf(w, ", rank %d", x.ThresholdRank)
	}
	fmt.Fprintf(w, "\nassuming: %s.\n%s\n\n", strings.Join(x.Assumptions, "; "), term(x.Summary))
}

// WhatIfChange is one association whose factor or rank the what-if
// shares change.
type WhatIfChange struct {
	AssocName
	Before     drift.Num `json:"factor_before"`
	After      drift.Num `json:"factor_after"`
	Delta      float64   `json:"factor_change"`
	RankBefore int32     `json:"rank_before,omitempty"`
	RankAfter  int32     `json:"rank_after,omitempty"`
}

// WhatIf is what changed shares do to every factor.
type WhatIf struct {
	ClusterAt
	Shares  []string       `json:"shares"`
	Changes []WhatIfChange `json:"changes"`
}

// Shares recomputes the inputs' tree with the changed shares (flags:
// as given, for the heading); user (if not empty) keeps only that user's
// rows.
func Shares(in *build.Inputs, changes []fairshare.ShareChange, flags []string, user string) (*WhatIf, error) {
	alg, damp := in.Settings.Algorithm, in.Settings.Dampening
	edited, err := in.Tree.WithShares(changes)
	if err != nil {
		return nil, err
	}
	before, err := in.Tree.Compute(alg, damp)
	if err != nil {
		return nil, err
	}
	after, err := edited.Compute(alg, damp)
	if err != nil {
		return nil, err
	}
	x := &WhatIf{ClusterAt: ClusterAt{in.Name, in.Computed, string(alg)}, Shares: flags, Changes: []WhatIfChange{}}
	for _, c := range fairshare.Changes(before, after) {
		a := in.Tree.Association(c.Assoc)
		if user != "" && a.User != user {
			continue
		}
		x.Changes = append(x.Changes, WhatIfChange{AssocName: AssocName{a.Account, a.User, a.Partition}, Before: drift.Num(c.Before.FairShare),
			After: drift.Num(c.After.FairShare), Delta: c.Delta(), RankBefore: c.Before.Rank, RankAfter: c.After.Rank})
	}
	return x, nil
}

// WriteTable prints the changes as explain --what-if's table.
func (x *WhatIf) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cluster %s at %s, %s (slurm.conf), with %s\n\n", term(x.Cluster), x.At.Format(time.RFC3339), x.Algorithm, term(strings.Join(x.Shares, ", ")))
	if len(x.Changes) == 0 {
		fmt.Fprintln(w, "no factor or rank changes")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tuser\tpartition\tfactor before\tfactor after\tchange\trank before\trank after\t")
	for _, c := range x.Changes {
		rb, ra := "", ""
		if c.RankBefore > 0 || c.RankAfter > 0 {
			rb, ra = fmt.Sprint(c.RankBefore), fmt.Sprint(c.RankAfter)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%+.6f\t%s\t%s\t\n", term(c.Account), term(c.User), term(c.Partition), num(c.Before), num(c.After), c.Delta, rb, ra)
	}
	tw.Flush()
}
