package build_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// BenchmarkBuild is the build stage of a steady refresh at 11k
// associations, the report already compared (the report memo holds it):
// what runs after every database refresh between two reports. same: the
// tree and usage are those of the last refresh (between decay passes);
// decayed: usage moved (a decay pass).
func BenchmarkBuild(b *testing.B) {
	in := buildtest.Inputs(time.Unix(1700000000, 0), 11112)
	// serve's defaults: no what-if views; the real 11k tree of make
	// bench-scale has few pending jobs
	in.Pending, in.MauiUsage, in.Priorities.Jobs = nil, nil, nil
	// as in serve: the report is compared with the tree rebuilt at its
	// moment, which later refreshes do not change
	in.Reported.Memo, in.Reported.DB = &build.ReportMemo{}, in.Tree
	assocs := associations(in.Tree)
	for _, bc := range []struct {
		name  string
		decay float64
	}{{"same", 1}, {"decayed", 0.999}} {
		b.Run(bc.name, func(b *testing.B) {
			in.Memo = &build.BuildMemo{}
			if _, err := build.Build(in); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				// each refresh reads a new tree, equal or not
				b.StopTimer()
				for i := range assocs {
					assocs[i].RawUsage *= bc.decay
				}
				c := *in
				var err error
				if c.Tree, err = fairshare.NewTree(slices.Clone(assocs)); err != nil { // NewTree keeps the slice
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := build.Build(&c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompare100k is the comparison of a new report at 100,000
// associations: with -benchmem, the garbage it makes, which sets the
// exporter's peak RSS at that size.
func BenchmarkCompare100k(b *testing.B) {
	in := buildtest.Inputs(time.Unix(1700000000, 0), 100000)
	in.Pending, in.MauiUsage, in.Priorities.Jobs = nil, nil, nil
	in.Reported.DB = in.Tree
	b.ReportAllocs()
	for b.Loop() {
		in.Reported.Memo = &build.ReportMemo{}
		if _, err := build.MemoCompare(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecovery is the recovery metric's computation (every user's
// time to its fair level under its own default assumption) at 11k and
// 100k associations, both algorithms: a rate for every other user, a
// running job for one in ten (committed: their jobs above their rate).
func BenchmarkRecovery(b *testing.B) {
	for _, n := range []int{11112, 100000} {
		in := buildtest.Inputs(time.Unix(1700000000, 0), n)
		root := in.Tree.Association(in.Tree.Root()).RawUsage
		in.ForecastRate = make([]float64, in.Tree.Len())
		for i := range in.ForecastRate {
			a := in.Tree.Association(i)
			if a.IsUser() && i%2 == 0 {
				in.ForecastRate[i] = root / 86400 / float64(n)
			}
			if i%10 == 0 && a.IsUser() {
				in.ForecastJobs = append(in.ForecastJobs, fairshare.RunningJob{Assoc: i, Billing: root / 86400 / float64(n), Start: 1699990000, End: 1700100000})
			}
		}
		// committed: the same jobs at three times the rate, ending each
		// hour of the next 10 days, so that the others' running jobs
		// commit more than their rate and every user's runs break at
		// 240 step ends
		committed := slices.Clone(in.ForecastJobs)
		for k := range committed {
			committed[k].Billing *= 3
			committed[k].End = 1700000000 + float64(k%240+1)*3600
		}
		plain := in.ForecastJobs
		for _, jobs := range []string{"", "/committed"} {
			if jobs != "" && n > 11112 {
				continue // minutes under Fair Tree: docs/performance.md
			}
			in.ForecastJobs = plain
			if jobs != "" {
				in.ForecastJobs = committed
			}
			for _, alg := range []fairshare.Algorithm{fairshare.AlgorithmClassic, fairshare.AlgorithmFairTree} {
				in.Settings.Algorithm = alg
				b.Run(fmt.Sprintf("%d/%s%s", n, alg, jobs), func(b *testing.B) {
					for b.Loop() {
						if _, err := in.ComputeRecovery(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
