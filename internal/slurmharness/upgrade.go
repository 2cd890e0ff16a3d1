package slurmharness

import (
	"fmt"
	"strings"
	"time"
)

// Upgrade moves the cluster to another release in place, as a site
// upgrades: slurmdbd first (stopped, started on the new release, which
// converts the database, waited for), then after ctldDown slurmctld and
// the slurmd, which read the older release's state. Running jobs go on
// under their slurmstepd meanwhile. Releases that run on the host only
// (its 22.05 and the builds of BuildsEnv): a chroot's daemons see another
// file system.
func (c *Cluster) Upgrade(release string, ctldDown time.Duration) {
	c.t.Helper()
	prefix, built := builtPrefix(release)
	if c.root != "" || (!built && release != "22.05") {
		c.t.Fatalf("upgrade to %s: only between the host's 22.05 and releases built under $%s", release, BuildsEnv)
	}
	nodes := c.slurmds()
	for _, d := range append(nodes, "slurmctld", "slurmdbd") {
		if c.StopDaemon(d) {
			c.t.Errorf("upgrade to %s: %s did not exit within %v of SIGTERM: killed", release, d, stopGrace)
		}
	}
	c.prefix, c.cfg.Release = prefix, release
	c.linkClients()
	c.StartDaemon("slurmdbd")
	c.waitDbd(5 * time.Minute)
	time.Sleep(ctldDown)
	c.startCtld()
	for _, d := range nodes {
		c.StartDaemon(d)
	}
	c.waitFor("the nodes to answer", 2*time.Minute, func() error {
		out, err := c.Run("sinfo", "-h", "-N", "-o", "%N %T")
		if err == nil && (strings.Contains(out, "down") || strings.Contains(out, "unknown") || strings.TrimSpace(out) == "") {
			err = fmt.Errorf("node states %q", out)
		}
		return err
	})
}
