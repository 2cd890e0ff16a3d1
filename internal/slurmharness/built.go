package slurmharness

import (
	"os"
	"os/exec"
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

// linkClients points the cluster's bin directory (first on Env's PATH) at
// the clients of its release on the host, so that a program started with
// Env, the exporter among them, runs the release's sshare after an
// Upgrade as it would after a site upgraded its packages in place.
func (c *Cluster) linkClients() {
	c.t.Helper()
	if err := os.MkdirAll(c.binDir(), 0o755); err != nil {
		c.t.Fatal(err)
	}
	for _, name := range clients {
		target := c.program(name)
		if !filepath.IsAbs(target) {
			p, err := exec.LookPath(name)
			if err != nil {
				continue // not installed: the command fails as it would without the link
			}
			target = p
		}
		link := filepath.Join(c.binDir(), name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			c.t.Fatal(err)
		}
	}
}
