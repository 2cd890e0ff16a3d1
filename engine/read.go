package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

func (e *Engine) read(ctx context.Context, name string, ref *slurmdbd.Refresher, at time.Time) (*build.Inputs, *dbRead, error) {
	if err := e.open(ctx); err != nil {
		return nil, nil, err
	}
	c, err := e.src.Cluster(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	conf := e.conf
	local := name == conf.ClusterName
	var problems []problem
	passes, since, phase, err := e.phase(conf, local, at)
	if err != nil {
		problems = append(problems, problemOf(fmt.Errorf("decay pass phase unknown: usage may be off by one PriorityCalcPeriod: %w", err)))
	}
	ref.Passes, ref.Since, ref.Location = passes, since, time.Local
	rules := billingRules(conf)
	if local {
		ref.Boot, ref.Billing = e.boot, &rules
	}
	snap, err := c.Refresh(ctx, ref, at)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range snap.Problems {
		problems = append(problems, problemOf(p))
	}
	var schema *result.Schema
	if _, db := c.(dbCluster); db {
		schema = e.noteSchema(name, snap.Layout)
	}
	tree, err := fairshare.NewTree(snap.Tree.Assocs)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	in := &build.Inputs{
		Name:     name,
		Settings: settings(conf),
		Database: build.Database{
			Tree:          tree,
			TieOrderKnown: local && !e.boot.IsZero(),
			Boot:          ref.Boot,
			Passes:        passes,
			Phase:         phase,
			TRES:          map[string][]float64{},
			Computed:      at,
			Schema:        schema,
		},
		Options: build.Options{Maui: e.o.maui, Tolerance: e.o.tolerance, Named: e.o.named},
	}
	for _, p := range setTRES(in, snap) {
		problems = append(problems, problem{p, p})
	}
	if local {
		problems = append(problems, checkBilling(in, snap.Jobs, snap.TRESNames, conf, rules)...)
	}
	ids := treeIDs(snap)
	if local && !e.boot.IsZero() {
		if err := e.setBoot(ctx, c, in, since, ids); err != nil {
			problems = append(problems, problemOf(fmt.Errorf("the usage charged before slurmctld started is bounded as if all of it were, and the tails of jobs that ended by then by a whole PriorityCalcPeriod: %w", err)))
		}
	}
	e.warnChanged(name, problems)
	in.Uncharged, in.Running, in.TailRisk, in.Unpriced = snap.Uncharged, snap.Running, snap.TailRisk, snap.Unpriced
	if snap.LastRan.OK {
		in.LastRollup = time.Unix(snap.LastRan.Hourly, 0)
	}
	in.AssocIDs = ids
	rd := &dbRead{cluster: c, tresNames: snap.TRESNames, qos: snap.QOS}
	if conf.PriorityWeightAssoc > 0 {
		rowPrio := slurmdbd.InheritedPriority(snap.Rows)
		rd.assocPriority = make([]uint32, len(ids))
		for i, r := range snap.Tree.Row {
			rd.assocPriority[i] = rowPrio[r]
		}
	}
	return in, rd, nil
}

// dbRead is what a refresh's extras read by, beside the inputs: where
// the cluster is read, and the names and priorities of its rows.
type dbRead struct {
	cluster       ClusterSource
	tresNames     map[uint32]string
	qos           map[uint32]slurmdbd.QOS
	assocPriority []uint32 // inherited priority of each association (nil: weight 0)
}

// treeIDs are the id_assoc of snap's tree associations, in the tree's
// order.
func treeIDs(snap *slurmdbd.Snapshot) []uint32 {
	ids := make([]uint32, len(snap.Tree.Row))
	for i, r := range snap.Tree.Row {
		ids[i] = snap.Rows[r].ID
	}
	return ids
}

// noteSchema is the schema of l, logged when first seen for the cluster
// and whenever it changes (a slurmdbd upgrade, which the Refresher looks
// for every slurmdbd.RecheckHours): which columns the exporter reads the
// tree and usage by is otherwise shown only by the schema_info metric.
func (e *Engine) noteSchema(name string, l slurmdbd.Layout) *result.Schema {
	s := &result.Schema{LftRgt: l.LftRgt, Lineage: l.Lineage, AccountFlags: l.AcctFlags, QOSUsage: l.QOSUsage}
	cs := e.clusters[name]
	if cs == nil || (cs.schema != nil && *cs.schema == *s) {
		return s
	}
	msg := "slurmdbd schema detected"
	if cs.schema != nil {
		msg = "slurmdbd schema changed"
	}
	cs.schema = s
	e.o.log.Info().Str("slurm_cluster", name).Bool("lft_rgt", s.LftRgt).Bool("lineage", s.Lineage).
		Bool("account_flags", s.AccountFlags).Bool("qos_usage", s.QOSUsage).Msg(msg)
	return s
}

// setTRES keeps the decayed usage of each TRES but billing (the usage
// itself), by name, and returns the problems it met.
func setTRES(in *build.Inputs, snap *slurmdbd.Snapshot) (problems []string) {
	for id, v := range snap.TRES {
		if id == slurmdbd.TRESBilling {
			continue
		}
		n := snap.TRESNames[id]
		if n == "" {
			n = fmt.Sprintf("tres_%d", id)
			problems = append(problems, fmt.Sprintf("usage rows of id_tres=%d, which tres_table does not list: exported as tres=%q", id, n))
		}
		in.TRES[n] = v
	}
	return problems
}

// problem is a data problem to warn of: its identity and its message.
type problem struct{ id, msg string }

// problemOf is err's problem: a usage.Problem names its identity, any
// other error is its message.
func problemOf(err error) problem {
	if p, ok := errors.AsType[*usage.Problem](err); ok {
		return problem{p.Identity, err.Error()}
	}
	return problem{err.Error(), err.Error()}
}

// warnChanged logs each of a cluster's data problems when it first
// appears, by its identity: a bad row stays bad at every refresh, and
// logging it every minute (or again whenever a value in its message
// decayed) buried everything else.
func (e *Engine) warnChanged(cluster string, problems []problem) {
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		if !e.warned[cluster][p.id] {
			e.o.log.Warn().Str("slurm_cluster", cluster).Msg(p.msg)
		}
		seen[p.id] = true
	}
	if len(problems) > 0 {
		e.o.log.Debug().Str("slurm_cluster", cluster).Int("problems", len(problems)).Msg("data problems left out of this refresh (each warned once)")
	}
	e.warned[cluster] = seen
}

func settings(conf *slurmconf.Config) build.Settings {
	return build.Settings{
		Algorithm: conf.Algorithm(),
		Dampening: float64(conf.FairShareDampeningFactor),
		Config: result.Config{
			PriorityFlags: strings.Join(conf.PriorityFlagNames, ","),
			HalfLife:      conf.PriorityDecayHalfLife,
			CalcPeriod:    conf.PriorityCalcPeriod,
			Dampening:     conf.FairShareDampeningFactor,
			ResetPeriod:   conf.PriorityUsageResetPeriod,
		},
	}
}
