package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// ForecastThreshold is --forecast with an optional THRESHOLD after it
// (--forecast, --forecast 0.6, --forecast=0.6): a flag kong takes as a
// bool, which then reads a number if one follows.
type ForecastThreshold struct {
	On        bool
	Threshold float64 // 0: the association's fair level
}

func (f *ForecastThreshold) IsBool() bool { return true }

func (f *ForecastThreshold) Decode(ctx *kong.DecodeContext) error {
	f.On = true
	tok := ctx.Scan.Peek()
	if tok.Type != kong.FlagValueToken && !tok.IsValue() {
		return nil
	}
	var v float64
	switch x := tok.Value.(type) {
	case bool: // --config.file's true or false
		ctx.Scan.Pop()
		f.On = x
		return nil
	case float64: // --config.file's number
		v = x
	case string:
		if b, err := strconv.ParseBool(x); err == nil && tok.Type == kong.FlagValueToken {
			ctx.Scan.Pop() // --forecast=true, $SLURMDBD_EXPORTER_FORECAST
			f.On = b
			return nil
		}
		var err error
		if v, err = strconv.ParseFloat(x, 64); err != nil {
			if tok.Type == kong.FlagValueToken {
				return fmt.Errorf("threshold %q: expected a factor between 0 and 1", x)
			}
			return nil // not ours: kong reports it
		}
	default:
		return nil
	}
	if !(v > 0 && v <= 1) {
		return fmt.Errorf("threshold %v: expected a factor above 0 and at most 1", v)
	}
	ctx.Scan.Pop()
	f.Threshold = v
	return nil
}

// ForecastFlags are explain's recovery forecast and what-if shares.
type ForecastFlags struct {
	Forecast ForecastThreshold `name:"forecast" placeholder:"THRESHOLD" help:"With --user: the factor now and over the next 7 days with no new jobs from the user and the others using the cluster as over --forecast.window or as their running jobs commit, whichever is more, and when it reaches THRESHOLD (default: its fair level) (docs/forecast.md)."`
	ForecastWindowFlag
	ForecastAt []time.Duration `name:"forecast.at" placeholder:"DURATION" help:"With --forecast: also show the factor this long from now (repeatable), e.g. a few PriorityCalcPeriods to compare with sshare later."`
	WhatIf     []string        `name:"what-if" placeholder:"ACCOUNT[/USER]=SHARES" help:"Recompute with these raw shares (repeatable; parent for FairShare=parent) and list the associations whose factor or Fair Tree rank changes (docs/forecast.md). Reads only."`
}

// Check is what Validate cannot see: --forecast and --what-if are
// --user's, not --job's.
func (f *ForecastFlags) Check(user string, job uint32) error {
	switch {
	case f.Forecast.On && user == "":
		return fmt.Errorf("--forecast: expected --user, the user whose factor to forecast")
	case f.Forecast.On && len(f.WhatIf) > 0:
		return fmt.Errorf("--forecast and --what-if: expected one of them")
	case (f.Forecast.On || len(f.WhatIf) > 0) && job != 0:
		return fmt.Errorf("--job: not with --forecast or --what-if")
	case slices.ContainsFunc(f.ForecastAt, func(d time.Duration) bool { return d <= 0 }):
		return fmt.Errorf("--forecast.at %v: expected positive durations such as 5m", f.ForecastAt)
	case len(f.ForecastAt) > 0 && !f.Forecast.On:
		return fmt.Errorf("--forecast.at: expected --forecast")
	}
	_, err := f.ShareChanges()
	return err
}

// ShareChanges parses --what-if.
func (f *ForecastFlags) ShareChanges() ([]fairshare.ShareChange, error) {
	var out []fairshare.ShareChange
	for _, w := range f.WhatIf {
		c, err := parseShareChange(w)
		if err != nil {
			return nil, fmt.Errorf("--what-if %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseShareChange reads one what-if change: ACCOUNT=SHARES or
// ACCOUNT/USER=SHARES, SHARES a number or parent (FairShare=parent).
func parseShareChange(w string) (fairshare.ShareChange, error) {
	bad := fmt.Errorf("%q: expected ACCOUNT=SHARES or ACCOUNT/USER=SHARES, SHARES a number below %d or parent", w, fairshare.SharesParent)
	name, val, ok := strings.Cut(w, "=")
	acct, user, _ := strings.Cut(name, "/")
	if !ok || acct == "" || strings.Contains(user, "/") || (strings.Contains(name, "/") && user == "") {
		return fairshare.ShareChange{}, bad
	}
	c := fairshare.ShareChange{Account: acct, User: user, Shares: fairshare.SharesParent}
	if val != "parent" {
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil || n >= uint64(fairshare.SharesParent) {
			return fairshare.ShareChange{}, bad
		}
		c.Shares = uint32(n)
	}
	return c, nil
}
