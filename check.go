package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

type checkCmd struct {
	SshareFile string  `name:"sshare-file" type:"existingfile" help:"Output of 'sshare -a -l -P' (with or without -m, -n), of 'sshare --json -a' or a slurmrestd /slurm/v0.0.N/shares body (v0.0.40 on; JSON is told by its first non-blank byte, '{'). Alone: replay mode, the tree, shares and raw usage come from it and every other column is recomputed and compared. With --dsn-file or $SLURMDBD_EXPORTER_DSN: the reported side of database mode."`
	Algorithm  string  `default:"auto" enum:"auto,classic,fair_tree,depth_oblivious" help:"Algorithm to recompute with: auto (replay: from the header, a LevelFS column means Fair Tree; database: from slurm.conf's PriorityFlags), classic, fair_tree or depth_oblivious."`
	Dampening  float64 `name:"dampening-factor" default:"1" help:"FairShareDampeningFactor of the classic algorithm (replay mode; database mode reads slurm.conf)."`
	// serve's default is 1e-4 (docs/serve.md): a report there is compared
	// with the database while slurmctld's passes go on
	Tolerance float64 `name:"drift.formula-tolerance" aliases:"tolerance" default:"1e-6" help:"Formula drift allowed on top of what the inputs' precision explains (absolute; sshare prints 6 decimals)."`
	Output    string  `default:"table" enum:"table,json" help:"Output format: table or json."`

	database
}

func (c *checkCmd) Validate() error {
	if c.Dampening < 1 {
		return fmt.Errorf("--dampening-factor %v: expected a number >= 1 (FairShareDampeningFactor)", c.Dampening)
	}
	if !(c.Tolerance >= 0) {
		return fmt.Errorf("--drift.formula-tolerance %v: expected a number >= 0", c.Tolerance)
	}
	if c.SshareFile == "" && !c.database.enabled() {
		return fmt.Errorf("nothing to check: expected --sshare-file (replay mode) or --dsn-file / $SLURMDBD_EXPORTER_DSN (database mode)")
	}
	return c.database.validate()
}

const depthObliviousNote = "depth_oblivious is best effort: slurmctld sums siblings' normalized usage that it computes lazily, mixing values from different moments"

func (c *checkCmd) Run(env *runEnv) error {
	if c.database.enabled() {
		return c.runDatabase(env)
	}
	f, err := os.Open(c.SshareFile)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := parseSshare(f, c.SshareFile, c.Algorithm)
	if err != nil {
		return err
	}
	out.FillMissingFactor(c.Dampening)
	alg := fairshare.Algorithm(c.Algorithm)
	if c.Algorithm == "auto" {
		alg = fairshare.AlgorithmClassic
		if out.Has(sshare.LevelFS) {
			alg = fairshare.AlgorithmFairTree
		}
	}
	cmp, err := drift.CompareReport(drift.Input{Algorithm: alg, Dampening: c.Dampening, Tolerance: drift.Tolerance{Formula: c.Tolerance}, Report: out}, true)
	if err != nil {
		return fmt.Errorf("%s: %w", c.SshareFile, err)
	}
	rep := cmp.Formula
	if alg == fairshare.AlgorithmDepthOblivious {
		rep.Note = depthObliviousNote
	}
	return writeReport(env, rep, c.Output)
}

// parseSshare reads sshare output, streamed and within sshare's limits
// (MaxBytes, MaxRows; for JSON MaxJSONBytes, and memory bounded by the
// rows): `sshare -a -l -P` text or, when its first byte other than a BOM
// or white space is '{', `sshare --json` or a slurmrestd /shares body.
// Text without a header takes its columns from the algorithm. Output cut
// short or listing an association twice is an error: compared, it would
// read as drift. The caller fills a FactorMissing report's factor.
func parseSshare(r io.Reader, name, algorithm string) (*sshare.Output, error) {
	br := bufio.NewReader(r)
	var out *sshare.Output
	var err error
	if bom, ok := startsJSON(br); ok {
		br.Discard(bom)
		out, err = sshare.ParseJSON(br)
	} else {
		var layout sshare.Layout
		if algorithm != "auto" {
			fairTree := algorithm == string(fairshare.AlgorithmFairTree)
			layout = func(n int) ([]string, error) { return sshare.ColumnsForCount(n, fairTree) }
		}
		out, err = sshare.Parse(br, layout)
	}
	if errors.Is(err, sshare.ErrNoHeader) {
		return nil, fmt.Errorf("%s: --algorithm auto needs sshare's header line (without it, Fair Tree -l and classic -l -m output have the same number of columns): rerun sshare without -n or pass --algorithm", name)
	}
	if err == nil {
		err = out.Unique()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// startsJSON reports whether the first byte of br after a UTF-8 BOM and
// white space is '{', looking no further than br's buffer, and how long
// the BOM is. Nothing is read: the text parser counts blank lines.
func startsJSON(br *bufio.Reader) (bom int, ok bool) {
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		bom = 3
	}
	for i := bom; i < br.Size(); i++ {
		b, err := br.Peek(i + 1)
		if err != nil {
			return 0, false
		}
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return bom, true
		}
		return 0, false
	}
	return 0, false
}

// writeReport prints the report and turns drift into exit status 1.
func writeReport(env *runEnv, rep *drift.Report, format string) error {
	var err error
	if format == "json" {
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
