package slurmharness

import (
	"os"
	"path/filepath"
)

// BuildsEnv names a directory of Slurm releases that no Debian suite the
// harness knows packages (23.02, 23.11, 24.05, 25.05, 25.11), each
// installed under <dir>/<release> (its bin, sbin and lib) by whoever runs
// the tests: the harness runs them on the host beside its own 22.05, with
// the host's munged and MariaDB, and never builds them.
const BuildsEnv = "SLURMDBD_EXPORTER_SLURM_BUILDS"

// builtPrefix is where the release is installed under $BuildsEnv, if it
// is.
func builtPrefix(release string) (string, bool) {
	dir := os.Getenv(BuildsEnv)
	if dir == "" || release == "" {
		return "", false
	}
	p := filepath.Join(dir, release)
	if _, err := os.Stat(filepath.Join(p, "sbin", "slurmctld")); err != nil {
		return "", false
	}
	return p, true
}

// program is the path of a Slurm program of the cluster's release: under
// its prefix for a release built apart, else its name, found on PATH.
func (c *Cluster) program(name string) string {
	if c.prefix == "" {
		return name
	}
	for _, d := range []string{"sbin", "bin"} {
		if p := filepath.Join(c.prefix, d, name); fileExists(p) {
			return p
		}
	}
	return name
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
