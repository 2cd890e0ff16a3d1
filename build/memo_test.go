package build_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// associations is a copy of t's associations.
func associations(t *fairshare.Tree) []fairshare.Association {
	as := make([]fairshare.Association, t.Len())
	for i := range as {
		as[i] = t.Association(i)
	}
	return as
}

// TestBuildMemo: build.Build with the memo of earlier builds publishes what a
// build.Build without it computes, whatever input changed in between, and keeps
// the associations when none did.
func TestBuildMemo(t *testing.T) {
	base := buildtest.Inputs(time.Unix(1700000000, 0), 400)
	base.Reported.Memo, base.Reported.DB = &build.ReportMemo{}, base.Tree
	// a new tree equal to in's but for change, as a refresh reads it
	retree := func(in *build.Inputs, change func([]fairshare.Association)) {
		as := associations(in.Tree)
		change(as)
		tree, err := fairshare.NewTree(as)
		if err != nil {
			t.Fatal(err)
		}
		in.Tree = tree
	}
	user := 0
	for i := range base.Tree.Len() {
		if a := base.Tree.Association(i); a.IsUser() && a.RawUsage > 0 {
			user = i
			break
		}
	}
	cases := []struct {
		name   string
		change func(in *build.Inputs)
	}{
		{"nothing", func(in *build.Inputs) { retree(in, func([]fairshare.Association) {}) }},
		{"usage", func(in *build.Inputs) { retree(in, func(as []fairshare.Association) { as[user].RawUsage *= 2 }) }},
		{"shares", func(in *build.Inputs) { retree(in, func(as []fairshare.Association) { as[user].Shares++ }) }},
		{"dampening", func(in *build.Inputs) { in.Settings.Dampening = 2 }},
		{"algorithm", func(in *build.Inputs) { in.Settings.Algorithm = fairshare.AlgorithmClassic }},
		{"tres", func(in *build.Inputs) {
			in.TRES = maps.Clone(in.TRES)
			in.TRES["cpu"] = slices.Clone(in.TRES["cpu"])
			in.TRES["cpu"][user]++
		}},
		{"uncharged", func(in *build.Inputs) { in.Uncharged = make([]float64, in.Tree.Len()); in.Uncharged[user] = 1 }},
		{"pending", func(in *build.Inputs) { in.Pending = slices.Clone(in.Pending); in.Pending[user] = !in.Pending[user] }},
		{"maui", func(in *build.Inputs) { in.Maui.Decay = 0.5 }},
		{"report", func(in *build.Inputs) {
			r := *in.Reported
			r.Memo = &build.ReportMemo{}
			r.Out = shares.Of(in.Tree, in.Tree.FairTree())
			in.Reported = &r
		}},
		{"no report", func(in *build.Inputs) { in.Reported = nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := *base
			in.Memo = &build.BuildMemo{}
			first, err := build.Build(&in)
			if err != nil {
				t.Fatal(err)
			}
			next := in
			c.change(&next)
			got, err := build.Build(&next)
			if err != nil {
				t.Fatal(err)
			}
			next.Memo = nil
			want, err := build.Build(&next)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := fmt.Sprint(got.Assocs), fmt.Sprint(want.Assocs); g != w {
				t.Errorf("with the memo: associations differ from a build without it")
			}
			if g, w := fmt.Sprint(got.Jobs), fmt.Sprint(want.Jobs); g != w {
				t.Errorf("with the memo: jobs differ from a build without it")
			}
			reused := &got.Assocs[0] == &first.Assocs[0]
			if reused != (c.name == "nothing") {
				t.Errorf("associations reused: %v", reused)
			}
		})
	}
}
