package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// extras reads what the per-association factors do not need: pending jobs
// for their priorities and the ticket-based active set, usage windows for
// Maui (again only after a new hourly rollup).
func (e *Engine) extras(ctx context.Context, cs *clusterState, in *build.Inputs, rd *dbRead) error {
	prio, rows, err := e.pendingJobs(ctx, rd, in)
	if err != nil {
		return err
	}
	in.Priorities = prio
	if !e.o.whatIf {
		return nil
	}
	pending := map[uint32]bool{}
	for _, r := range rows {
		pending[r.Assoc] = true
	}
	in.Pending = make([]bool, len(in.AssocIDs))
	for i, id := range in.AssocIDs {
		in.Pending[i] = pending[id]
	}
	if e.o.mauiInterval <= 0 {
		return nil
	}
	rollup := in.LastRollup.Unix()
	if cs.maui == nil || cs.mauiRollup != rollup || len(cs.maui) != len(in.AssocIDs) {
		windows, err := rd.cluster.WindowUsage(ctx, in.Computed, e.o.mauiInterval, e.o.maui.Depth)
		if err != nil {
			return err
		}
		cs.maui, cs.mauiRollup = mauiUsage(in.Tree, in.AssocIDs, windows, e.o.maui), rollup
	}
	in.MauiUsage = cs.maui
	return nil
}

// ForecastInputs reads what the recovery forecast assumes of the future:
// the jobs running at in.Computed, each until its time limit, and every
// association's own usage rate over the last window of rolled-up hours
// (the hours after the last rollup are not in the tables yet). Jobs and
// usage of associations outside the tree (removed users) are left out.
func (e *Engine) ForecastInputs(ctx context.Context, in *build.Inputs, window time.Duration) error {
	index := make(map[uint32]int, len(in.AssocIDs))
	for i, id := range in.AssocIDs {
		index[id] = i
	}
	c := e.clusters[in.Name]
	if c == nil || c.cluster == nil {
		return fmt.Errorf("cluster %s: not read", in.Name)
	}
	jobs, problems, err := c.cluster.RunningJobs(ctx, in.Computed)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		e.o.log.Warn().Err(problems[0]).Int("jobs", len(problems)).Msg("running jobs left out of the forecast")
	}
	in.ForecastJobs = nil
	for _, j := range jobs {
		i, ok := index[j.Assoc]
		if !ok {
			continue
		}
		end := math.Inf(1)
		if j.LimitEnd > 0 {
			end = float64(j.LimitEnd)
		}
		in.ForecastJobs = append(in.ForecastJobs, fairshare.RunningJob{Assoc: i, Billing: j.Billing, Start: float64(j.Start), End: end})
	}
	in.ForecastRate = make([]float64, len(in.AssocIDs))
	in.ForecastWindow = window
	if in.LastRollup.IsZero() {
		return nil
	}
	used, err := c.cluster.BillingUsage(ctx, in.LastRollup.Add(-window), in.LastRollup)
	if err != nil {
		return err
	}
	for id, v := range used {
		if i, ok := index[id]; ok {
			in.ForecastRate[i] += v / window.Seconds()
		}
	}
	return nil
}

// mauiUsage is each association's share of the cluster's windowed usage:
// a user's own, an account's summed over its subtree.
func mauiUsage(t *fairshare.Tree, ids []uint32, windows map[uint32][]float64, c fairshare.MauiConfig) []float64 {
	n := t.Len()
	used := make([][]float64, n)
	for i := n - 1; i >= 0; i-- {
		if used[i] == nil {
			used[i] = make([]float64, c.Depth)
		}
		for k, v := range windows[ids[i]] {
			used[i][k] += v
		}
		if p := t.Association(i).Parent; p >= 0 {
			if used[p] == nil {
				used[p] = make([]float64, c.Depth)
			}
			for k, v := range used[i] {
				used[p][k] += v
			}
		}
	}
	total := used[t.Root()]
	out := make([]float64, n)
	for i := range out {
		out[i] = fairshare.MauiUsage(used[i], total, c)
	}
	return out
}
