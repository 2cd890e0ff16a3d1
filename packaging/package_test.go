// Package packaging holds the deb and rpm packages of slurmdbd_exporter:
// nfpm.yaml, the systemd unit, the maintainer scripts and the examples
// they install. Its tests build both packages with package.sh, as make
// package does, and install the deb on this machine.
package packaging

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// Names as nfpm.yaml and the maintainer scripts spell them.
const (
	pkgName     = "slurmdbd-exporter"
	serviceUser = "slurmdbd_exporter"
	unitPath    = "/usr/lib/systemd/system/slurmdbd_exporter.service"
	dsnDir      = "/etc/slurmdbd_exporter"
	testVersion = "1.2.3"
)

// shippedFile is a file or directory the package installs: its mode in
// the package, its group once installed (postinstall gives the DSN
// directory to the service's group), and the repository file it must
// equal.
type shippedFile struct {
	path  string
	mode  fs.FileMode
	group string
	src   string
}

// shipped is what the package installs besides the docs and dashboards
// taken from the repository, its own directories included (the rpm must
// own them to remove them).
var shipped = []shippedFile{
	{"/usr/bin/slurmdbd_exporter", 0o755, "root", ""},
	{unitPath, 0o644, "root", "slurmdbd_exporter.service"},
	{"/etc/default/slurmdbd_exporter", 0o644, "root", "slurmdbd_exporter.default"},
	{dsnDir, fs.ModeDir | 0o750, serviceUser, ""},
	{"/usr/share/slurmdbd_exporter", fs.ModeDir | 0o755, "root", ""},
	{"/usr/share/slurmdbd_exporter/grafana", fs.ModeDir | 0o755, "root", ""},
	{"/usr/share/slurmdbd_exporter/grafana/provisioning", fs.ModeDir | 0o755, "root", ""},
	{"/usr/share/slurmdbd_exporter/dashboards", fs.ModeDir | 0o755, "root", ""},
	{"/usr/share/doc/slurmdbd-exporter", fs.ModeDir | 0o755, "root", ""},
	{"/usr/share/doc/slurmdbd-exporter/docs", fs.ModeDir | 0o755, "root", ""},
	{"/usr/share/slurmdbd_exporter/grant.sql", 0o644, "root", "grant.sql"},
	{"/usr/share/slurmdbd_exporter/prometheus.yml", 0o644, "root", "prometheus.yml"},
	{"/usr/share/slurmdbd_exporter/rules.yml", 0o644, "root", "../dashboards/prometheus/rules.yml"},
	{"/usr/share/slurmdbd_exporter/grafana/provisioning/datasources/slurmdbd_exporter.yaml", 0o644, "root", "grafana/provisioning/datasources/slurmdbd_exporter.yaml"},
	{"/usr/share/slurmdbd_exporter/grafana/provisioning/dashboards/slurmdbd_exporter.yaml", 0o644, "root", "grafana/provisioning/dashboards/slurmdbd_exporter.yaml"},
	{"/usr/share/slurmdbd_exporter/dashboards/README.md", 0o644, "root", "grafana/dashboards/README.md"},
	{"/usr/share/doc/slurmdbd-exporter/README.md", 0o644, "root", "../README.md"},
}

// fromRepo are the packaged files that come from globs over the
// repository (destination: source), docs and dashboards both: every one
// present when the package is built must be in it.
func fromRepo(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, g := range []struct{ pattern, dst string }{
		{"../docs/*.md", "/usr/share/doc/slurmdbd-exporter/docs/"},
		{"../dashboards/*.json", "/usr/share/slurmdbd_exporter/dashboards/"},
	} {
		srcs, err := filepath.Glob(g.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			m[g.dst+filepath.Base(s)] = s
		}
	}
	return m
}

// TestPackage builds the deb and the rpm with package.sh, checks what they
// hold, installs the deb (dpkg -i, as root: a real install on this
// machine), checks the installed files, the service user and the unit,
// installs it again as an upgrade, and purges it.
func TestPackage(t *testing.T) {
	testenv.Require(t, []string{"dpkg", "dpkg-deb", "dpkg-query", "getent", "useradd", "userdel", "groupdel", "setpriv"},
		[]string{"dpkg", "libc-bin", "passwd", "util-linux"})
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "installing the package needs root")
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", pkgName).Output(); err == nil && !bytes.HasSuffix(out, []byte(" not-installed")) {
		t.Fatalf("%s is already on this machine (%s): this test installs and purges it; remove it first (dpkg --purge %s)", pkgName, out, pkgName)
	}
	if _, err := os.Stat(dsnDir); err == nil {
		t.Fatalf("%s exists: this test writes a DSN there and removes the directory; move it away first", dsnDir)
	}
	_, err := user.Lookup(serviceUser)
	userExisted := err == nil

	dir := t.TempDir()
	start := time.Now()
	build := exec.Command("./package.sh", dir)
	build.Env = append(os.Environ(), "VERSION="+testVersion)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("package.sh: %v\n%s", err, testenv.Tail(out))
	}
	t.Logf("package.sh (go build, nfpm deb and rpm): %v", time.Since(start).Round(time.Millisecond))
	deb := only(t, filepath.Join(dir, "*.deb"))
	rpm := only(t, filepath.Join(dir, "*.rpm"))
	if v := strings.TrimSpace(run(t, filepath.Join(dir, "slurmdbd_exporter"), "--version")); v != "slurmdbd_exporter "+testVersion {
		t.Errorf("built binary --version: %q, want %q", v, "slurmdbd_exporter "+testVersion)
	}

	repo := fromRepo(t)
	t.Run("deb", func(t *testing.T) { checkDeb(t, deb, repo) })
	t.Run("rpm", func(t *testing.T) { checkRPM(t, rpm, repo) })

	t.Cleanup(func() {
		if out, err := dpkg("--purge", pkgName); err != nil {
			t.Errorf("dpkg --purge %s: %v\n%s", pkgName, err, out)
		}
		os.RemoveAll(dsnDir)
		if !userExisted {
			exec.Command("userdel", serviceUser).Run()
			exec.Command("groupdel", serviceUser).Run() // when userdel left it
		}
	})
	start = time.Now()
	out := mustDpkg(t, "-i", deb)
	t.Logf("dpkg -i: %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, "not enabled or started") {
		t.Errorf("dpkg -i: no message that the service is not started:\n%s", out)
	}
	if _, err := os.Lstat("/etc/systemd/system/multi-user.target.wants/slurmdbd_exporter.service"); err == nil {
		t.Error("the package enabled the service: it must wait for the DSN")
	}
	if v := strings.TrimSpace(run(t, "/usr/bin/slurmdbd_exporter", "--version")); v != "slurmdbd_exporter "+testVersion {
		t.Errorf("installed --version: %q, want %q", v, "slurmdbd_exporter "+testVersion)
	}
	checkUser(t)
	checkInstalled(t, repo)
	checkUnit(t)
	checkAsServiceUser(t)

	// An upgrade (the same version again): no first-install message, the
	// administrator's /etc/default file and DSN kept.
	const local = "\n# local change, kept across upgrades\n"
	appendFile(t, "/etc/default/slurmdbd_exporter", local)
	out = mustDpkg(t, "-i", deb)
	if strings.Contains(out, "not enabled or started") {
		t.Errorf("dpkg -i over an installed package printed the first-install message:\n%s", out)
	}
	if b, _ := os.ReadFile("/etc/default/slurmdbd_exporter"); !strings.HasSuffix(string(b), local) {
		t.Error("upgrade replaced the modified /etc/default/slurmdbd_exporter")
	}
	checkUser(t)
	checkMode(t, dsnDir, fs.ModeDir|0o750, serviceUser)
	checkMode(t, dsnDir+"/dsn", 0o640, serviceUser)

	// Purge: the package's files go, the DSN and the user stay (postremove).
	mustDpkg(t, "--purge", pkgName)
	for _, f := range shipped {
		if _, err := os.Stat(f.path); err == nil && f.path != dsnDir {
			t.Errorf("%s still there after dpkg --purge", f.path)
		}
	}
	if _, err := os.Stat(dsnDir + "/dsn"); err != nil {
		t.Errorf("dpkg --purge removed the administrator's DSN: %v", err)
	}
	if _, err := user.Lookup(serviceUser); err != nil {
		t.Errorf("user %s gone after purge: %v", serviceUser, err)
	}
}

// checkDeb compares the deb's control fields and file list with what it
// must hold, modes included: nothing missing, nothing more.
func checkDeb(t *testing.T, deb string, repo map[string]string) {
	for field, want := range map[string]string{"Package": pkgName, "Version": testVersion} {
		if got := strings.TrimSpace(run(t, "dpkg-deb", "-f", deb, field)); got != want {
			t.Errorf("deb %s: %q, want %q", field, got, want)
		}
	}
	if c := run(t, "dpkg-deb", "-I", deb, "conffiles"); strings.TrimSpace(c) != "/etc/default/slurmdbd_exporter" {
		t.Errorf("deb conffiles: %q, want /etc/default/slurmdbd_exporter", c)
	}
	got := map[string]string{} // path: "mode owner/group"
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c: %q", line)
		}
		got[strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")] = f[0] + " " + f[1]
	}
	want := map[string]string{}
	for _, f := range shipped {
		want[f.path] = f.mode.String() + " root/root"
	}
	for dst := range repo {
		want[dst] = "-rw-r--r-- root/root"
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("deb %s: %q, want %q", p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok && !strings.HasPrefix(g, "d") {
			t.Errorf("deb holds %s, which it should not", p)
		}
	}
}

// checkRPM reads the rpm with rpm -qp when rpm is installed (optional:
// not a Debian tool, so not installed for this test), as checkDeb does.
func checkRPM(t *testing.T, rpm string, repo map[string]string) {
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Logf("rpm not installed: %s built, not inspected", filepath.Base(rpm))
		return
	}
	if got := run(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION}", rpm); got != pkgName+" "+testVersion {
		t.Errorf("rpm name and version: %q", got)
	}
	got := map[string]string{} // path: "mode user group flags"
	for _, line := range strings.Split(strings.TrimSpace(run(t, "rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]", rpm)), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 { // no flags
			f = slices.Insert(f, 3, "")
		}
		if len(f) != 5 {
			t.Fatalf("rpm -qp: %q", line)
		}
		got[f[4]] = strings.Join(f[:4], " ")
	}
	for _, f := range shipped {
		flags := ""
		if f.path == "/etc/default/slurmdbd_exporter" {
			flags = "cn" // %config(noreplace)
		}
		if w := f.mode.String() + " root root " + flags; got[f.path] != w {
			t.Errorf("rpm %s: %q, want %q", f.path, got[f.path], w)
		}
	}
	for dst := range repo {
		if w := "-rw-r--r-- root root "; got[dst] != w {
			t.Errorf("rpm %s: %q, want %q", dst, got[dst], w)
		}
	}
	for p, g := range got {
		if _, ok := repo[p]; !ok && !slices.ContainsFunc(shipped, func(f shippedFile) bool { return f.path == p }) && !strings.HasPrefix(g, "d") {
			t.Errorf("rpm holds %s, which it should not", p)
		}
	}
	scripts := run(t, "rpm", "-qp", "--scripts", rpm)
	for _, s := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "useradd --system"} {
		if !strings.Contains(scripts, s) {
			t.Errorf("rpm scripts: no %q in\n%s", s, scripts)
		}
	}
}

func checkUser(t *testing.T) {
	t.Helper()
	u, err := user.Lookup(serviceUser)
	if err != nil {
		t.Fatalf("service user: %v", err)
	}
	if uid, _ := strconv.Atoi(u.Uid); uid == 0 || uid >= 1000 {
		t.Errorf("user %s has uid %s: want a system uid", serviceUser, u.Uid)
	}
	if g, err := user.LookupGroupId(u.Gid); err != nil || g.Name != serviceUser {
		t.Errorf("user %s's group: %v %v, want %s", serviceUser, g, err, serviceUser)
	}
	f := strings.Split(strings.TrimSpace(run(t, "getent", "passwd", serviceUser)), ":")
	if len(f) != 7 || f[5] != "/nonexistent" || f[6] != "/usr/sbin/nologin" {
		t.Errorf("passwd entry %q: want home /nonexistent, shell /usr/sbin/nologin", strings.Join(f, ":"))
	}
	if _, err := os.Stat("/nonexistent"); err == nil {
		t.Error("/nonexistent exists: the user's home was created")
	}
}

func checkInstalled(t *testing.T, repo map[string]string) {
	t.Helper()
	for _, f := range shipped {
		checkMode(t, f.path, f.mode, f.group)
		if f.src != "" {
			sameFile(t, f.path, f.src)
		}
	}
	for dst, src := range repo {
		checkMode(t, dst, 0o644, "root")
		sameFile(t, dst, src)
	}
	// Grafana's dashboard provider reads the directory the package fills.
	b, err := os.ReadFile("/usr/share/slurmdbd_exporter/grafana/provisioning/dashboards/slurmdbd_exporter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*path:\s*(\S+)\s*$`).FindSubmatch(b)
	if m == nil || string(m[1]) != "/usr/share/slurmdbd_exporter/dashboards" {
		t.Errorf("dashboard provider path %q: want /usr/share/slurmdbd_exporter/dashboards, where the package puts them", m)
	}
}

// checkUnit runs systemd-analyze on the installed unit where it exists:
// verify (it exits 0 on unknown keys and bad values, so any line about the
// unit fails the test) and, with systemd 250 or later, the offline
// security score.
func checkUnit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not installed: unit not verified")
		return
	}
	out, err := exec.Command("systemd-analyze", "verify", unitPath).CombinedOutput()
	if err != nil || strings.Contains(string(out), "slurmdbd_exporter") {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	} else if len(out) > 0 {
		t.Logf("systemd-analyze verify, about other units:\n%s", out)
	}
	// --threshold=20: fail above an exposure of 2.0 (1.2 on systemd 252).
	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=20", "--no-pager", unitPath).CombinedOutput()
	score := regexp.MustCompile(`Overall exposure level for \S+: (\S+ \S+)`).FindSubmatch(out)
	switch {
	case score == nil:
		t.Logf("systemd-analyze security --offline not available here: %v %s", err, testenv.Tail(out))
	case err != nil:
		t.Errorf("systemd-analyze security: exposure %s, above 2.0: %v\n%s", score[1], err, out)
	default:
		t.Logf("systemd-analyze security: exposure %s", score[1])
	}
}

// checkAsServiceUser runs, as the service user, what the service runs:
// the binary with ARGS from the installed /etc/default file (here with
// --help, which parses every flag, as no database is at hand), and reads
// the DSN file set up as the postinstall message says. It also checks that
// every flag and variable the default file mentions exists.
func checkAsServiceUser(t *testing.T) {
	t.Helper()
	asUser := []string{"--reuid=" + serviceUser, "--regid=" + serviceUser, "--init-groups"}
	help := run(t, "setpriv", append(asUser, "sh", "-c", `. /etc/default/slurmdbd_exporter && exec /usr/bin/slurmdbd_exporter serve $ARGS --help`)...)
	if !strings.Contains(help, "--web.listen-address=:10819") {
		t.Error("serve --help: default port not 10819, the port of prometheus.yml")
	}
	const defaults = "/etc/default/slurmdbd_exporter"
	b, _ := os.ReadFile(defaults)
	for _, m := range regexp.MustCompile(`--([a-z][a-z0-9.-]+)`).FindAllStringSubmatch(string(b), -1) {
		name := "--" + m[1]
		if rest, ok := strings.CutPrefix(m[1], "no-"); ok {
			name = "--[no-]" + rest
		}
		if !strings.Contains(help, name) {
			t.Errorf("%s mentions %s, not a flag of serve", defaults, m[0])
		}
	}
	for _, v := range regexp.MustCompile(`SLURMDBD_EXPORTER_[A-Z_]+`).FindAllString(string(b), -1) {
		if !strings.Contains(help, "$"+v) {
			t.Errorf("%s mentions %s, not a variable of serve", defaults, v)
		}
	}

	const dsn = "exporter:not-a-password@tcp(127.0.0.1:3306)/slurm_acct_db\n"
	if err := os.WriteFile(dsnDir+"/dsn", []byte(dsn), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "sh", "-c", "chown root:slurmdbd_exporter /etc/slurmdbd_exporter/dsn && chmod 0640 /etc/slurmdbd_exporter/dsn")
	if got := run(t, "setpriv", append(asUser, "cat", dsnDir+"/dsn")...); got != dsn {
		t.Errorf("the service user reads %q from the DSN file, want %q", got, dsn)
	}
	other := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", dsnDir+"/dsn")
	if out, err := other.CombinedOutput(); err == nil {
		t.Errorf("user nobody can read the DSN: %s", out)
	}
}

// TestDashboardsGlob packages a copy of the repository that holds a
// dashboard: nfpm.yaml's pattern must take dashboards/*.json when there
// are some (TestPackage covers none).
func TestDashboardsGlob(t *testing.T) {
	testenv.Require(t, []string{"dpkg-deb"}, []string{"dpkg"})
	stage := t.TempDir()
	run(t, "cp", "-r", ".", filepath.Join(stage, "packaging"))
	run(t, "cp", "-r", "../docs", "../README.md", stage)
	for _, f := range []string{"dashboards/a.json", "dashboards/prometheus/rules.yml", "bin"} {
		p := filepath.Join(stage, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("{}\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nfpm := exec.Command("go", "run", nfpmModule(t), "package", "--packager", "deb", "--config", "packaging/nfpm.yaml", "--target", stage+"/")
	nfpm.Dir = stage
	nfpm.Env = append(os.Environ(), "VERSION=1.0.0", "BINARY=bin", "GOARCH=amd64")
	if out, err := nfpm.CombinedOutput(); err != nil {
		t.Fatalf("nfpm: %v\n%s", err, out)
	}
	list := run(t, "dpkg-deb", "-c", only(t, filepath.Join(stage, "*.deb")))
	var got []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) == 6 && strings.HasPrefix(f[5], "./usr/share/slurmdbd_exporter/dashboards/") {
			got = append(got, strings.TrimPrefix(f[5], "./usr/share/slurmdbd_exporter/dashboards/"))
		}
	}
	slices.Sort(got)
	if want := []string{"", "README.md", "a.json"}; !slices.Equal(got, want) {
		t.Errorf("dashboards in the package: %q, want %q", got, want)
	}
}

// nfpmModule is the nfpm command package.sh runs, module@version: one
// place for the pin.
func nfpmModule(t *testing.T) string {
	b, err := os.ReadFile("package.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NFPM=(\S+@v\d+\.\d+\.\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("package.sh: no NFPM=module@vX.Y.Z line")
	}
	return string(m[1])
}

// TestGrantSQL runs grant.sql on a throwaway MariaDB: the user it creates
// holds SELECT on slurm_acct_db and nothing else, and can log in.
func TestGrantSQL(t *testing.T) {
	db := mariadbtest.Start(t, "")
	db.MustSQL("CREATE DATABASE slurm_acct_db; CREATE TABLE slurm_acct_db.cluster_table (name tinytext)")
	sql, err := os.ReadFile("grant.sql")
	if err != nil {
		t.Fatal(err)
	}
	db.MustSQL(string(sql))
	grants := strings.Split(strings.TrimSpace(db.MustSQL("SHOW GRANTS FOR 'exporter'@'localhost'")), "\n")
	want := []string{
		"GRANT USAGE ON *.* TO `exporter`@`localhost` IDENTIFIED BY PASSWORD",
		"GRANT SELECT ON `slurm_acct_db`.* TO `exporter`@`localhost`",
	}
	if len(grants) != len(want) || !strings.HasPrefix(grants[0], want[0]) || grants[1] != want[1] {
		t.Errorf("grants of exporter@localhost:\n%s\nwant:\n%s", strings.Join(grants, "\n"), strings.Join(want, "\n"))
	}
	as := func(stmt string) error {
		return exec.Command("mariadb", "--no-defaults", "--socket="+filepath.Join(db.Dir, "my.sock"), "-uexporter", "-pCHANGE_ME", "-e", stmt).Run()
	}
	if err := as("SELECT name FROM slurm_acct_db.cluster_table"); err != nil {
		t.Errorf("exporter cannot SELECT: %v", err)
	}
	if err := as("INSERT INTO slurm_acct_db.cluster_table VALUES ('x')"); err == nil {
		t.Error("exporter can INSERT")
	}
}

// TestPrometheusConfig checks the example scrape configuration with
// promtool, its rule file where the package installs it taken from the
// repository.
func TestPrometheusConfig(t *testing.T) {
	testenv.Require(t, []string{"promtool"}, []string{"prometheus"})
	b, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(filepath.Join("..", "dashboards", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	const installed = "/usr/share/slurmdbd_exporter/rules.yml"
	if !bytes.Contains(b, []byte(installed)) {
		t.Fatalf("prometheus.yml does not load %s", installed)
	}
	conf := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(conf, bytes.ReplaceAll(b, []byte(installed), []byte(rules)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "promtool", "check", "config", conf)
}

// dpkg runs dpkg, waiting up to 5 minutes for the dpkg lock while
// another process (apt-get from another test) holds it.
func dpkg(args ...string) (string, error) {
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(2 * time.Second) {
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("locked by another process")) || time.Now().After(deadline) {
			return string(out), err
		}
	}
}

func mustDpkg(t *testing.T, args ...string) string {
	t.Helper()
	out, err := dpkg(args...)
	if err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, testenv.Tail([]byte(out)))
	}
	return out
}

// run returns the command's standard output; a failure ends the test
// with both outputs.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, testenv.Tail(stdout.Bytes()), testenv.Tail(stderr.Bytes()))
	}
	return stdout.String()
}

// only is the one file matching pattern.
func only(t *testing.T, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(pattern)
	if len(m) != 1 {
		t.Fatalf("%s: %d files, want 1", pattern, len(m))
	}
	return m[0]
}

func checkMode(t *testing.T, path string, mode fs.FileMode, group string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	g, err := user.LookupGroupId(strconv.Itoa(int(st.Gid)))
	if fi.Mode() != mode || st.Uid != 0 || err != nil || g.Name != group {
		t.Errorf("%s: %v uid %d group %v, want %v root:%s", path, fi.Mode(), st.Uid, g, mode, group)
	}
}

func sameFile(t *testing.T, installed, src string) {
	t.Helper()
	a, err1 := os.ReadFile(installed)
	b, err2 := os.ReadFile(src)
	if err1 != nil || err2 != nil || string(a) != string(b) {
		t.Errorf("installed %s differs from %s (%v, %v)", installed, src, err1, err2)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprint(f, s)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
