package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/slurmharness"
)

// baseBinaryEnv names the other build TestSameOutput compares this
// tree's with (make same-output builds it from BASE).
const baseBinaryEnv = "SLURMDBD_EXPORTER_BASE_BINARY"

// TestSameOutput runs check, explain and serve of two builds on every
// recording and fails with a unified diff wherever their outputs differ:
// a refactoring must leave what the exporter says unchanged, and the
// recordings are real Slurm's clusters in every state the live tests
// judge. Opt-in: it says nothing about this tree alone.
func TestSameOutput(t *testing.T) {
	base := os.Getenv(baseBinaryEnv)
	if base == "" {
		t.Skip("compares another build's outputs with this tree's on every recording: make same-output BASE=<git revision>, or " +
			baseBinaryEnv + "=<binary> go test -count=1 -run '^TestSameOutput$' ./e2e")
	}
	r := newReplayer(t)
	for _, dir := range recorded(t, ".") {
		rel, _ := filepath.Rel(recordings, dir)
		t.Run(rel, func(t *testing.T) {
			l := r.load(t, dir)
			runs := sameOutputRuns(t, r, l)
			for _, c := range runs {
				sameRun(t, base, l.env(), c)
			}
			sameServe(t, base, l)
			t.Logf("%d outputs compared, %d of them explain --job", len(runs)+1, countJobs(runs))
		})
	}
}

// sameCmd is a command compared on a capture: name (the command and
// the flags that tell it from the others) before the capture's inputs.
type sameCmd struct{ name, inputs []string }

// sameOutputRuns are the one-shot commands compared on a capture: check
// as its replay runs it, in both formats; explain, at the read's middle,
// for the first few user associations sshare listed and for the jobs
// still pending in the dump. Logs are JSON, for logTimes.
func sameOutputRuns(t *testing.T, r *replayer, l loaded) []sameCmd {
	t.Helper()
	check := append(l.checkArgs(""), "--log.format", "json")
	runs := []sameCmd{{[]string{"check"}, check}, {[]string{"check", "--output", "json"}, check}}
	explain := append(append(l.inputs(), l.boot()...), "--log.format", "json",
		"--at", fmt.Sprintf("%.6f", float64(l.moment.Middle().UnixNano())/1e9))
	for _, who := range firstUsers(t, l, 3) {
		for _, format := range []string{"table", "json"} {
			runs = append(runs, sameCmd{[]string{"explain", "--account", who[0], "--user", who[1], "--output", format}, explain})
		}
	}
	for _, job := range pendingJobs(t, r, l, 3) {
		runs = append(runs, sameCmd{[]string{"explain", "--job", job, "--output", "json"}, explain})
	}
	return runs
}

// countJobs counts the explain --job runs: a capture with pending jobs
// explains them.
func countJobs(runs []sameCmd) int {
	n := 0
	for _, c := range runs {
		if slices.Contains(c.name, "--job") {
			n++
		}
	}
	return n
}

// firstUsers are the first n distinct (account, user) associations of
// the captured sshare -a -l -P -m, in its order, but root's user, which
// holds nothing in any recording.
func firstUsers(t *testing.T, l loaded, n int) [][2]string {
	t.Helper()
	var out [][2]string
	seen := map[[2]string]bool{}
	for _, line := range strings.Split(readFile(t, l.in(slurmharness.CaptureSshare)), "\n")[1:] {
		f := strings.Split(line, "|")
		if len(f) < 2 || f[1] == "" || f[1] == "root" {
			continue
		}
		who := [2]string{strings.TrimSpace(f[0]), f[1]}
		if !seen[who] && len(out) < n {
			seen[who] = true
			out = append(out, who)
		}
	}
	return out
}

// pendingJobs are up to n jobs still pending (state 0) in l's dump.
func pendingJobs(t *testing.T, r *replayer, l loaded, n int) []string {
	t.Helper()
	out := r.db.MustSQL(fmt.Sprintf("SELECT id_job FROM `%s`.`%s_job_table` WHERE state = 0 ORDER BY id_job LIMIT %d", l.db, l.moment.Cluster, n))
	return strings.Fields(out)
}

// sameRun runs c with both binaries and diffs what each said.
func sameRun(t *testing.T, base string, env []string, c sameCmd) {
	t.Helper()
	said := func(bin string) string {
		code, stdout, stderr, _ := runBinary(t, bin, env, slices.Concat(c.name, c.inputs)...)
		return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, logTimes.ReplaceAllString(stderr, "$1"))
	}
	sameText(t, strings.Join(c.name, " "), said(base), said(exporter))
}

// logTimes is a JSON log line's own timestamp, the one part of stderr two
// runs never share.
var logTimes = regexp.MustCompile(`("time":)"[^"]*"`)

// sameServe starts serve of both builds at once on l's database, with no
// reported side (serve reads sshare only live, and computes for the wall
// clock: no --at), and diffs their /metrics after the first refresh. A
// decay pass (a minute apart in the recordings) may fall between the two
// refreshes and change every usage: outputs that differ are read once
// more, and only a difference that stays is a failure.
func sameServe(t *testing.T, base string, l loaded) {
	t.Helper()
	args := append(l.inputs(), "--reported.source", "none")
	metrics := func(bin string) *served { return startBinary(t, bin, "/-/ready", l.env(), args...) }
	for try := 1; ; try++ {
		b, w := metrics(base), metrics(exporter)
		_, bm := b.scrape()
		_, wm := w.scrape()
		b.stop()
		w.stop()
		bs, ws := sameExposition(string(bm)), sameExposition(string(wm))
		if bs == ws || try == 2 {
			sameText(t, "serve /metrics", bs, ws)
			return
		}
		t.Log("serve /metrics differ: again, in case a decay pass fell between the two refreshes")
	}
}

// sameExposition is an exposition as two runs of one build share it:
// each family's samples sorted (the exporter writes some families in map
// order), and the samples of what the run itself measures left out, their
// HELP and TYPE kept: runMeasured.
func sameExposition(text string) string {
	var out, family []string
	flush := func() {
		slices.Sort(family)
		out, family = append(out, family...), nil
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			flush()
			out = append(out, line)
		case !runMeasured.MatchString(line):
			family = append(family, line)
		}
	}
	flush()
	return strings.Join(out, "\n") + "\n"
}

// runMeasured are the samples that follow the process or the wall clock,
// not the recording: Go's runtime and the process, build_info (version
// and revision), and timestamps, ages, durations and the rollup's lag
// (now less the last rollup).
var runMeasured = regexp.MustCompile(`^(go_|process_|promhttp_)|^[a-z_]+(_build_info|_timestamp_seconds|_age_seconds|_duration_seconds(_bucket|_sum|_count)?|_rollup_lag_seconds)[{ ]`)

// sameText fails t with a unified diff of base's and this tree's text
// when they differ.
func sameText(t *testing.T, what, base, work string) {
	t.Helper()
	if base == work {
		return
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "base"), filepath.Join(dir, "work")
	if err := os.WriteFile(a, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(work), 0o644); err != nil {
		t.Fatal(err)
	}
	diff, _ := exec.Command("diff", "-u", "--label", "base: "+what, "--label", "work tree: "+what, a, b).CombinedOutput()
	t.Errorf("%s differs:\n%s", what, diff)
}
