package sshare

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Run runs `sshare -a -l -P -m` (-m: a Partition column, so that one
// user's associations in several partitions can be told apart) against
// the cluster of slurmConf (SLURM_CONF) and parses its output. ctx bounds
// it; the process is killed and reaped when ctx ends.
func Run(ctx context.Context, slurmConf string) (*Output, error) {
	cmd := exec.CommandContext(ctx, "sshare", "-a", "-l", "-P", "-m")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+slurmConf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sshare -a -l -P -m: %w", ctx.Err())
		}
		return nil, fmt.Errorf("sshare -a -l -P -m: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	out, err := Parse(&stdout, nil)
	if err != nil {
		return nil, fmt.Errorf("output of sshare -a -l -P -m: %w", err)
	}
	return out, nil
}
