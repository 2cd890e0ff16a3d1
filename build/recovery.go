package build

import (
	"math"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// Forecast is the recovery forecast of the inputs: their tree, settings
// and passes, with the running jobs and rates read for it.
func (in *Inputs) Forecast() fairshare.Forecast {
	return fairshare.Forecast{Tree: in.Tree, Algorithm: in.Settings.Algorithm, Dampening: in.Settings.Dampening, Passes: in.Passes,
		At: fairshare.Seconds(in.Computed), Jobs: in.ForecastJobs, Rate: in.ForecastRate}
}

// The recovery forecast looks this far ahead, sampling every
// RecoveryStep (bisection finds the pass in between): explain --forecast
// and the recovery metric alike.
const (
	RecoveryHorizon = 30 * 24 * time.Hour
	RecoveryStep    = time.Hour
)

// ComputeRecovery is every user association's time to its fair level
// under its own default assumption (fairshare.Forecast.Recovery): the
// recovery metric. Under Fair Tree a user without usage is at or above
// its fair level (LevelFS +Inf), whatever rank the ties of idle
// associations give it.
func (in *Inputs) ComputeRecovery() (*result.Recovery, error) {
	f := in.Forecast()
	t := in.Tree
	var users []int
	for i := range t.Len() {
		if a := t.Association(i); a.IsUser() {
			users = append(users, i)
		}
	}
	thr, err := t.FairLevels(users, f.Algorithm, f.Dampening)
	if err != nil {
		return nil, err
	}
	cs, err := f.Recovery(users, thr, RecoveryHorizon.Seconds(), RecoveryStep.Seconds())
	if err != nil {
		return nil, err
	}
	r := &result.Recovery{Computed: in.Computed, Seconds: make(map[result.AssocKey]float64, len(users))}
	for k, i := range users {
		c, a := cs[k], t.Association(i)
		s := math.Inf(1)
		switch {
		case math.IsNaN(c.Values.FairShare):
			continue
		case !c.Rising || (f.Algorithm == fairshare.AlgorithmFairTree && c.Values.RawUsage == 0):
			s = 0
		case c.Found:
			s = c.At - f.At
		}
		r.Seconds[result.KeyOf(a.Account, a.User, a.Partition)] = s
	}
	return r, nil
}
