package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// sshareUsageErr is how far sshare's RawUsage can be from slurmctld's: it
// prints usage_raw truncated to an integer.
const sshareUsageErr = 1

type checkCmd struct {
	SshareFile string  `name:"sshare-file" required:"" type:"existingfile" help:"Output of 'sshare -a -l -P' (with or without -m, -n) to replay: the tree, shares and raw usage come from it and every other column is recomputed and compared."`
	Algorithm  string  `default:"auto" enum:"auto,classic,fair_tree,depth_oblivious" help:"Algorithm to recompute with: auto (from the header: LevelFS means Fair Tree), classic, fair_tree or depth_oblivious."`
	Dampening  float64 `name:"dampening-factor" default:"1" help:"FairShareDampeningFactor of the classic algorithm."`
	Tolerance  float64 `default:"1e-6" help:"Absolute drift allowed on top of what sshare's rounding of RawUsage to an integer explains."`
	Output     string  `default:"table" enum:"table,json" help:"Output format: table or json."`
}

func (c *checkCmd) Validate() error {
	if c.Dampening < 1 {
		return fmt.Errorf("--dampening-factor %v: expected a number >= 1 (FairShareDampeningFactor)", c.Dampening)
	}
	if !(c.Tolerance >= 0) {
		return fmt.Errorf("--tolerance %v: expected a number >= 0", c.Tolerance)
	}
	return nil
}

const depthObliviousNote = "depth_oblivious is best effort: slurmctld sums siblings' normalized usage that it computes lazily, mixing values from different moments"

func (c *checkCmd) Run(env *runEnv) error {
	f, err := os.Open(c.SshareFile)
	if err != nil {
		return err
	}
	defer f.Close()
	var layout sshare.Layout
	if c.Algorithm != "auto" {
		fairTree := c.Algorithm == string(fairshare.AlgorithmFairTree)
		layout = func(n int) ([]string, error) { return sshare.ColumnsForCount(n, fairTree) }
	}
	out, err := sshare.Parse(f, layout)
	if errors.Is(err, sshare.ErrNoHeader) {
		return fmt.Errorf("%s: --algorithm auto needs sshare's header line (without it, Fair Tree -l and classic -l -m output have the same number of columns): rerun sshare without -n or pass --algorithm", c.SshareFile)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.SshareFile, err)
	}
	alg := fairshare.Algorithm(c.Algorithm)
	if c.Algorithm == "auto" {
		alg = fairshare.AlgorithmClassic
		if out.Has(sshare.LevelFS) {
			alg = fairshare.AlgorithmFairTree
		}
	}
	assocs, err := out.Associations()
	if err != nil {
		return fmt.Errorf("%s: %w", c.SshareFile, err)
	}
	tree, err := fairshare.NewTree(assocs)
	if err != nil {
		return fmt.Errorf("%s: %w", c.SshareFile, err)
	}
	vals, err := tree.Compute(alg, c.Dampening)
	if err != nil {
		return err
	}
	bounds := tree.UsageBounds(alg, vals, sshareUsageErr, c.Dampening)
	rep := drift.Compare(alg, c.Tolerance, drift.FromSshare(out), drift.FromTree(tree, vals, bounds))
	if alg == fairshare.AlgorithmDepthOblivious {
		rep.Note = depthObliviousNote
	}
	if c.Output == "json" {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(env.stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return exitCode(exitDrift)
	}
	return nil
}
