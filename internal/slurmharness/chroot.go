package slurmharness

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// releases maps Config.Release to the Debian suite that packages it: no
// backports suite carries a newer Slurm than the host's 22.05, so each
// runs from a chroot of that suite.
var releases = map[string]string{"24.11": "trixie", "26.05": "sid"}

// chrootPackages are installed in every release's chroot.
var chrootPackages = []string{"munge", "slurmdbd", "slurmctld", "slurmd", "slurm-client", "slurmrestd", "slurm-wlm-jwt-plugin"}

// clients get a wrapper on the PATH of Cluster.Env, so that the exporter
// runs them unchanged.
var clients = []string{"sacct", "sacctmgr", "sbatch", "scancel", "scontrol", "sinfo", "sprio", "squeue", "sshare"}

// cacheRoot keeps the chroots between runs: a build takes a minute or two
// and some 280 MB.
const cacheRoot = "/var/cache/slurmdbd-exporter-test"

// recipe is part of a chroot's cache key: change it with the build steps
// so that no chroot built the old way is reused.
const recipe = "1"

// restUser runs slurmrestd: it refuses root and SlurmUser (26.05 even
// with SLURMRESTD_SECURITY=disable_user_check).
const restUser = "slurmrestd"

// httpTimeout bounds each HTTP request the harness makes.
const httpTimeout = 30 * time.Second

// builtStamp, inside a chroot, is written last by a build that succeeded;
// it holds the installed packages' versions.
const builtStamp = ".slurmharness-built"

// openChroot returns the suite's chroot, building it when it is missing
// or broken, and the versions of its packages. The chroot is keyed by
// suite, package list and recipe, not by the mirror's current versions:
// those would need the suite's index at every run, and a chroot that
// moved under a test would make its results incomparable; the versions
// are logged instead. A shared lock on it is held until the test ends, so
// that no other test process rebuilds it under running daemons.
func openChroot(t testing.TB, suite string) (root, versions string) {
	t.Helper()
	sum := sha256.Sum256([]byte(suite + "\n" + strings.Join(chrootPackages, " ") + "\n" + recipe))
	root = filepath.Join(cacheRoot, suite+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(root+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	flock := func(how int) {
		if err := syscall.Flock(int(lock.Fd()), how); err != nil {
			t.Fatalf("flock %s: %v", lock.Name(), err)
		}
	}
	flock(syscall.LOCK_SH)
	if v, ok := built(root); ok {
		return root, v
	}
	// Exclusive waits for every other test to be done with the chroot.
	flock(syscall.LOCK_EX)
	defer flock(syscall.LOCK_SH)
	if v, ok := built(root); ok {
		return root, v // another process built it meanwhile
	}
	return root, build(t, suite, root)
}

// built reports whether the chroot at root is complete.
func built(root string) (versions string, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, builtStamp))
	if err != nil {
		return "", false
	}
	for _, p := range []string{"usr/sbin/slurmctld", "usr/sbin/slurmdbd", "usr/sbin/slurmd", "usr/sbin/slurmrestd", "usr/sbin/munged", "usr/bin/sshare"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return "", false
		}
	}
	return string(b), true
}

// build makes the suite's chroot at root from nothing and returns its
// packages' versions; it is called with the exclusive lock held.
func build(t testing.TB, suite, root string) string {
	t.Helper()
	testenv.Require(t, []string{"debootstrap"}, []string{"debootstrap"})
	mirror, err := debianMirror()
	if err != nil {
		testenv.SkipOrFail(t, "chroot for %s: %v", suite, err)
	}
	removeChroot(t, root)
	start := time.Now()
	run := func(args ...string) string {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8")
		out, err := cmd.CombinedOutput()
		if err != nil {
			testenv.SkipOrFail(t, "building the %s chroot: %s: %v\n%s", suite, strings.Join(args, " "), err, testenv.Tail(out))
		}
		return string(out)
	}
	run("debootstrap", "--variant=minbase", suite, root, mirror)
	for name, text := range map[string]string{
		// no package starts a service in the chroot
		"usr/sbin/policy-rc.d": "#!/bin/sh\nexit 101\n",
		// sid's Release file is often past its Valid-Until on a mirror
		"etc/apt/apt.conf.d/99slurmharness": "Acquire::Check-Valid-Until \"false\";\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in := func(args ...string) string { return run(append([]string{"/usr/sbin/chroot", root}, args...)...) }
	in("apt-get", "update", "-qq")
	in(append([]string{"apt-get", "install", "-y", "-qq", "--no-install-recommends"}, chrootPackages...)...)
	in("apt-get", "clean")
	in("sh", "-c", "id -u "+restUser+" || useradd -r -M -s /usr/sbin/nologin "+restUser)
	versions := in(append([]string{"dpkg-query", "-W", "-f", "${Package} ${Version}\\n"}, chrootPackages...)...)
	if err := os.WriteFile(filepath.Join(root, builtStamp), []byte(versions), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the %s chroot %s in %v", suite, root, time.Since(start).Round(time.Second))
	return versions
}

// debianMirror is the mirror of the host's own apt sources, which may be
// the only one the machine reaches.
func debianMirror() (string, error) {
	if b, err := os.ReadFile("/etc/apt/sources.list.d/debian.sources"); err == nil {
		for _, stanza := range strings.Split(string(b), "\n\n") {
			var uri string
			security := false
			for _, l := range strings.Split(stanza, "\n") {
				k, v, _ := strings.Cut(l, ":")
				switch strings.TrimSpace(k) {
				case "URIs":
					if f := strings.Fields(v); len(f) > 0 {
						uri = f[0]
					}
				case "Suites":
					security = strings.Contains(v, "-security")
				}
			}
			if uri != "" && !security {
				return uri, nil
			}
		}
	}
	if b, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "deb" && !strings.Contains(f[2], "-security") {
				return f[1], nil
			}
		}
	}
	return "", errors.New("no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list")
}

// removeChroot removes what a failed or interrupted build or test left at
// root: mounts first (lazily: nothing uses them under the exclusive
// lock), and never across a file system that is still mounted there.
func removeChroot(t testing.TB, root string) {
	t.Helper()
	for _, m := range mountsUnder(root) {
		_ = exec.Command("umount", "-l", m).Run()
	}
	if left := mountsUnder(root); len(left) > 0 {
		t.Fatalf("cannot remove %s: still mounted: %v", root, left)
	}
	if out, err := exec.Command("rm", "-rf", "--one-file-system", root).CombinedOutput(); err != nil {
		t.Fatalf("removing %s: %v\n%s", root, err, out)
	}
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			ms = append(ms, fs[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ms)))
	return ms
}

// mountChroot gives the daemons /proc, /sys and /dev (and /dev/pts) and
// undoes each mount when the test ends, after the daemons stopped. Two
// clusters in one chroot stack their mounts, and each unmounts one layer.
func mountChroot(t testing.TB, root string) {
	t.Helper()
	for _, m := range []struct {
		target string
		args   []string
	}{
		{"proc", []string{"-t", "proc", "proc"}},
		{"sys", []string{"--rbind", "/sys"}},
		{"dev", []string{"--rbind", "/dev"}},
	} {
		target := filepath.Join(root, m.target)
		args := append(m.args, target)
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			testenv.SkipOrFail(t, "mount %s: %v: %s", strings.Join(args, " "), err, out)
		}
		t.Cleanup(func() {
			if exec.Command("umount", "-R", target).Run() == nil {
				return
			}
			// a process that outlived its daemon still holds it
			if out, err := exec.Command("umount", "-R", "-l", target).CombinedOutput(); err != nil {
				t.Errorf("umount -R -l %s: %v: %s", target, err, out)
			}
		})
		if m.args[0] == "--rbind" {
			// so that unmounting in the chroot never propagates to the host
			if out, err := exec.Command("mount", "--make-rslave", target).CombinedOutput(); err != nil {
				t.Fatalf("mount --make-rslave %s: %v: %s", target, err, out)
			}
		}
	}
}

// startChroot prepares a cluster of a chroot release before its daemons
// start: mounts, /etc/hosts (SlurmctldHost is this host's name), the JWT
// key and the client wrappers.
func (c *Cluster) startChroot() {
	c.t.Helper()
	mountChroot(c.t, c.root)
	hosts, err := os.ReadFile("/etc/hosts")
	if err == nil {
		err = os.WriteFile(filepath.Join(c.root, "etc/hosts"), hosts, 0o644)
	}
	if err == nil {
		// AuthAltParameters: readable by SlurmUser (root) only
		err = os.WriteFile(filepath.Join(c.Dir, "jwt.key"), []byte(randHex(32)), 0o600)
	}
	if err == nil {
		err = os.Mkdir(c.binDir(), 0o755)
	}
	for _, name := range clients {
		if err != nil {
			break
		}
		// The exporter passes SLURM_CONF as the host sees it.
		script := fmt.Sprintf("#!/bin/sh\nSLURM_CONF=%s exec /usr/sbin/chroot %s /usr/bin/%s \"$@\"\n", c.in("slurm.conf"), c.root, name)
		err = os.WriteFile(filepath.Join(c.binDir(), name), []byte(script), 0o755)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// startChrootMunge starts a munged of the cluster's own, on a socket of
// its own, with the chroot's key: stopped with the cluster, it leaves no
// process behind in the chroot.
func (c *Cluster) startChrootMunge() {
	c.t.Helper()
	// munged checks that its key is owned by the user it runs as.
	c.ownedDir("munge", "munge")
	cmd := c.chrootCommand(context.Background(), c.uidGid("munge"), "/usr/sbin/munged", "-F", "--socket="+c.in("munge", "munge.socket"),
		"--pid-file="+c.in("munge", "munged.pid"), "--seed-file="+c.in("munge", "munged.seed"))
	c.spawn("munged", cmd)
	c.waitFor("munged to answer", 30*time.Second, func() error {
		sock := c.in("munge", "munge.socket")
		_, err := c.Run("sh", "-c", "munge -S "+sock+" -n | unmunge -S "+sock)
		return err
	})
}

// binDir holds the client wrappers.
func (c *Cluster) binDir() string { return filepath.Join(c.Dir, "bin") }

// in is a path in the cluster's directory as the daemons see it.
func (c *Cluster) in(elem ...string) string {
	return filepath.Join(append([]string{c.inDir}, elem...)...)
}

// chrootCommand runs name inside the chroot as userspec (uid:gid; ""
// root). MYSQL_UNIX_PORT: trixie's and sid's libmariadb insist on TLS over
// TCP, which the host's MariaDB 10.11 does not offer, and slurmdbd has no
// setting for it; the throwaway server's socket is in the cluster's
// directory, inside the chroot.
func (c *Cluster) chrootCommand(ctx context.Context, userspec, name string, args ...string) *exec.Cmd {
	pre := []string{c.root, name}
	if userspec != "" {
		pre = append([]string{"--userspec=" + userspec}, pre...)
	}
	cmd := exec.CommandContext(ctx, "/usr/sbin/chroot", append(pre, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "SLURM_CONF=" + c.in("slurm.conf"),
		"MYSQL_UNIX_PORT=" + c.in("my.sock")}
	if !c.cfg.HourAt.IsZero() {
		cmd.Env = append(cmd.Env, "TZ="+c.in(zoneFile))
	}
	return cmd
}

// uidGid is the chroot's user as uid:gid: chroot --userspec looks names up
// on the host, where the chroot's users may not exist.
func (c *Cluster) uidGid(user string) string {
	c.t.Helper()
	return strings.TrimSpace(c.MustRun("id", "-u", user)) + ":" + strings.TrimSpace(c.MustRun("id", "-g", user))
}

// ownedDir makes a directory of the cluster owned by a user of the
// chroot and returns its path inside.
func (c *Cluster) ownedDir(name, user string) string {
	c.t.Helper()
	var uid, gid int
	if _, err := fmt.Sscanf(c.uidGid(user), "%d:%d", &uid, &gid); err != nil {
		c.t.Fatal(err)
	}
	dir := filepath.Join(c.Dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		c.t.Fatal(err)
	}
	return c.in(name)
}

// chrootConf are the lines slurm.conf (slurmConf) or slurmdbd.conf need
// in a chroot: the cluster's own munged, and JWT for slurmrestd. Daemons
// and clients reach slurmdbd with the munged of AccountingStoragePass,
// not of AuthInfo.
func (c *Cluster) chrootConf(slurmConf bool) string {
	if c.root == "" {
		return ""
	}
	sock := c.in("munge", "munge.socket")
	s := fmt.Sprintf("AuthInfo=socket=%s\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n", sock, c.in("jwt.key"))
	if slurmConf {
		s += "AccountingStoragePass=" + sock + "\n"
	}
	return s
}

// Restd is what StartRestd started.
type Restd struct {
	// URL is the TCP listener, http://127.0.0.1:port, with JWT.
	URL string
	// Unix is the Unix socket as the host sees it, unix:///path, served
	// with rest_auth/local to root and to User.
	Unix string
	// User is the user that slurmrestd runs as: on the Unix socket it
	// refuses to act for another ("rejecting thread config for user root
	// while running as slurmrestd"), so it is the X-SLURM-USER-NAME there.
	User string
	// Token is a JWT for root, good for an hour (X-SLURM-USER-TOKEN).
	Token string
}

// StartRestd starts slurmrestd (releases of a chroot only: Debian's 22.05
// has none with /shares) twice and waits until both answer: on a TCP port
// of its own with JWT, and on a Unix socket with rest_auth/local. Two
// processes: with SLURM_JWT=daemon, which JWT needs, a request that
// rest_auth/local let in fails at slurmctld for want of a token.
func (c *Cluster) StartRestd() Restd {
	c.t.Helper()
	if c.root == "" {
		c.t.Fatal("StartRestd: the host's Slurm 22.05 has no slurmrestd serving /shares")
	}
	port := freePorts(c.t, 1)[0]
	sock := filepath.Join(c.ownedDir("restd", restUser), "slurmrestd.socket")
	user := c.uidGid(restUser)
	cmd := c.chrootCommand(context.Background(), user, "/usr/sbin/slurmrestd", "-a", "rest_auth/jwt", fmt.Sprintf("127.0.0.1:%d", port))
	// without it slurmrestd rejects every token ("Rejecting thread config token")
	cmd.Env = append(cmd.Env, "SLURM_JWT=daemon")
	c.spawn("slurmrestd", cmd)
	c.spawn("slurmrestd-local", c.chrootCommand(context.Background(), user, "/usr/sbin/slurmrestd", "-a", "rest_auth/local", "unix:"+sock))
	out := c.MustRun("scontrol", "token", "username=root", "lifespan=3600")
	tok, ok := strings.CutPrefix(strings.TrimSpace(out), "SLURM_JWT=")
	if !ok {
		c.t.Fatalf("scontrol token: %q", out)
	}
	r := Restd{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Unix: "unix://" + filepath.Join(c.root, sock), User: restUser, Token: tok}
	// each request has a deadline: one that hangs is a "not yet" of
	// waitFor, not a wait without end
	unix := &http.Client{Timeout: httpTimeout, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(c.root, sock))
	}}}
	tcp := &http.Client{Timeout: httpTimeout}
	// a few requests' deadlines: slurmrestd answers within seconds once up
	c.waitFor("slurmrestd to answer", 4*httpTimeout, func() error {
		for _, get := range []func() (*http.Response, error){
			func() (*http.Response, error) { return tcp.Get(r.URL + "/openapi/v3") },
			func() (*http.Response, error) { return unix.Get("http://localhost/openapi/v3") },
		} {
			resp, err := get()
			if err != nil {
				return err
			}
			resp.Body.Close()
		}
		return nil
	})
	return r
}
