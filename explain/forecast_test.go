package explain

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// demoForecast is a Synthetic Fair Tree cluster's inputs with a rate for
// every user but one, which has a job.
func demoForecast(t *testing.T) (*build.Inputs, int) {
	tr := fairshare.Synthetic(300, 3, 9)
	in := &build.Inputs{Name: "c", Settings: build.Settings{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1}, Database: build.Database{Tree: tr, Passes: fairshare.Passes{HalfLife: 86400, Period: 300}, Computed: time.Unix(1_800_000_000, 0), ForecastRate: make([]float64, tr.Len()), ForecastWindow: 7 * 24 * time.Hour}}
	u := -1
	root := tr.Association(tr.Root()).RawUsage
	for i := range tr.Len() {
		a := tr.Association(i)
		if !a.IsUser() {
			continue
		}
		if u < 0 && a.RawUsage > root/100 {
			u = i
			in.ForecastJobs = append(in.ForecastJobs, fairshare.RunningJob{Assoc: i, Billing: 100, Start: 1_799_990_000, End: 1_800_050_000})
			continue
		}
		in.ForecastRate[i] = root / 86400 / 30
	}
	if u < 0 {
		t.Fatal("no user with usage")
	}
	return in, u
}

// TestExplainForecast: the points are the forecast's values at their
// moments, the crossing is past the threshold and the pass before is not,
// and the sentence says so.
func TestExplainForecast(t *testing.T) {
	in, u := demoForecast(t)
	user := in.Tree.Association(u).User
	x, err := Forecast(in, u, user, 0, 4*time.Minute, time.Hour, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := in.Forecast().Quiet(u)
	want := []time.Duration{0, 90 * time.Second, 4 * time.Minute}
	want = append(want, forecastAfter[1:]...)
	if len(x.Points) != len(want) || x.Points[1].After != "+1m30s" || x.Points[2].After != "+4m" {
		t.Fatalf("points %+v: expected the moments %v", x.Points, want)
	}
	for k, p := range x.Points {
		v, _ := f.Values(f.At + want[k].Seconds())
		if float64(p.Factor) != v[u].FairShare {
			t.Fatalf("%s: factor %v, forecast %v", p.After, p.Factor, v[u].FairShare)
		}
	}
	if x.Crossing == nil || x.Direction != "rises" {
		t.Fatalf("expected the factor to rise past its fair level %v: %+v", x.Threshold, x)
	}
	at := float64(x.Crossing.Unix())
	after, _ := f.Values(at)
	before, _ := f.Values(at - f.Passes.Period)
	if after[u].FairShare < float64(x.Threshold) || before[u].FairShare >= float64(x.Threshold) {
		t.Fatalf("crossing at %v: factor %v there and %v a pass before, threshold %v", x.Crossing, after[u].FairShare, before[u].FairShare, x.Threshold)
	}
	if !strings.Contains(x.Summary, "with no new jobs from "+user) || !strings.Contains(x.Summary, "passes") {
		t.Fatalf("summary %q", x.Summary)
	}
}

// TestExplainWhatIf: the listing is fairshare.Changes of the tree with
// the changed shares, in order, and only the user's rows with --user.
func TestExplainWhatIf(t *testing.T) {
	in, u := demoForecast(t)
	a := in.Tree.Association(u)
	acct := in.Tree.Association(a.Parent)
	flags := []string{acct.Account + "=1000", acct.Account + "/" + a.User + "=parent"}
	changes := []fairshare.ShareChange{{Account: acct.Account, Shares: 1000}, {Account: acct.Account, User: a.User, Shares: fairshare.SharesParent}}
	x, err := Shares(in, changes, flags, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Changes) == 0 {
		t.Fatal("no change listed")
	}
	for k := 1; k < len(x.Changes); k++ {
		if abs(x.Changes[k].Delta) > abs(x.Changes[k-1].Delta) {
			t.Fatalf("not sorted by the size of the change at %d", k)
		}
	}
	mine, err := Shares(in, changes, flags, a.User)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mine.Changes {
		if c.User != a.User {
			t.Fatalf("--user %s lists %s", a.User, c.User)
		}
	}
}

func abs(v float64) float64 { return max(v, -v) }

// TestRecoveryMetricAgreesWithExplain: the recovery metric
// (Inputs.ComputeRecovery, every user from one shared scenario) is, for
// every user, explain --forecast's time to its fair level: 0 where it
// falls from at or above, +Inf where it does not come within the horizon.
// Under classic for every user; under Fair Tree for users with usage
// (idle users tie at +Inf, docs/forecast.md).
func TestRecoveryMetricAgreesWithExplain(t *testing.T) {
	for _, alg := range []fairshare.Algorithm{fairshare.AlgorithmClassic, fairshare.AlgorithmFairTree} {
		in, _ := demoForecast(t)
		in.Settings.Algorithm = alg
		// a flat tree, whose users' classic factors are near their fair
		// level; rates and jobs of several sizes
		in.Tree = fairshare.Synthetic(40, 2, 1)
		root := in.Tree.Association(in.Tree.Root()).RawUsage
		in.ForecastRate, in.ForecastJobs = make([]float64, in.Tree.Len()), nil
		for i := range in.ForecastRate {
			in.ForecastRate[i] = root / 86400 * float64(i%5)
			if i%7 == 0 {
				in.ForecastJobs = append(in.ForecastJobs, fairshare.RunningJob{Assoc: i, Billing: root / 86400 / 5, Start: 1_799_990_000, End: 1_800_100_000})
			}
		}
		r, err := in.ComputeRecovery()
		if err != nil {
			t.Fatal(err)
		}
		checked, finite := 0, 0
		for i := range in.Tree.Len() {
			a := in.Tree.Association(i)
			if !a.IsUser() || (alg == fairshare.AlgorithmFairTree && a.RawUsage == 0) {
				continue
			}
			x, err := Forecast(in, i, a.User, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := math.Inf(1)
			switch {
			case x.Direction == "falls":
				want = 0
			case x.CrossingSeconds != nil:
				want = *x.CrossingSeconds
				finite++
			}
			got, ok := r.Seconds[result.KeyOf(a.Account, a.User, a.Partition)]
			if !ok || got != want {
				t.Errorf("%s: %s: metric %v (present %v), explain --forecast %v", alg, a.User, got, ok, want)
			}
			checked++
		}
		if finite == 0 {
			t.Fatalf("%s: no user recovers within the horizon: the test checks nothing", alg)
		}
		t.Logf("%s: %d users agree, %d of them recover within the horizon", alg, checked, finite)
	}
}
