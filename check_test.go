package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replay runs the check command on a capture and decodes its JSON.
func replay(t *testing.T, capture []byte, args ...string) *drift.Report {
	t.Helper()
	f := filepath.Join(t.TempDir(), "sshare.txt")
	if err := os.WriteFile(f, capture, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, append([]string{"check", "--sshare-file", f, "--output", "json"}, args...)...)
	if code == exitError {
		t.Fatalf("check exited %d: %s", code, stderr)
	}
	var rep drift.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("check --output json: %v\n%s", err, stdout)
	}
	if (code == 0) != rep.OK() {
		t.Errorf("check exited %d but its report says ok=%v", code, rep.OK())
	}
	return &rep
}

// TestNewerSlurmReplay replays real captures of Slurm 24.11 and 25.11
// (../shared/slurm-captures). Fair Tree replays to print precision, idle or
// running; classic captures were taken while jobs ran and show the one-pass
// lag, which a lone snapshot cannot tell from drift: lag_not_excluded, not
// drift (check_series_test.go).
func TestNewerSlurmReplay(t *testing.T) {
	for _, rel := range []string{"slurm-24.11", "slurm-25.11"} {
		for _, tc := range []struct {
			file   string
			args   []string
			wantOK bool
		}{
			{"sshare-a-l-P.txt", nil, true},
			{"sshare-a-l-P-m.txt", nil, true},
			{"sshare-a-l-P-n.txt", []string{"--algorithm", "fair_tree"}, true},
			{"sshare-a-l-P-idle-fairtree.txt", nil, true},
			{"sshare-a-l-P-classic.txt", nil, true},
		} {
			t.Run(rel+"/"+tc.file, func(t *testing.T) {
				rep := replay(t, readTestdata(t, filepath.Join(rel, tc.file)), tc.args...)
				if rep.OK() != tc.wantOK {
					t.Errorf("ok = %v, want %v: %+v", rep.OK(), tc.wantOK, rep.Summary)
				}
				if rep.Summary.Counts[drift.StatusOK]+rep.Summary.Counts[drift.StatusDrift]+rep.Summary.Counts[drift.StatusLagNotExcluded] != 17 {
					t.Errorf("compared %+v, want all 17 rows", rep.Summary.Counts)
				}
			})
		}
	}
}

// TestCheckJSONContract pins the public JSON of check.
func TestCheckJSONContract(t *testing.T) {
	code, out, errOut := runCLI(t, "check", "--sshare-file", "testdata/slurm-24.11/sshare-a-l-P.txt", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"algorithm", "tolerance", "summary", "associations"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("top level has no %q", k)
		}
	}
	var assocs []map[string]json.RawMessage
	if err := json.Unmarshal(doc["associations"], &assocs); err != nil {
		t.Fatal(err)
	}
	if len(assocs) != 17 {
		t.Fatalf("%d associations, want 17 (one per sshare row)", len(assocs))
	}
	for _, k := range []string{"account", "user", "partition", "parent", "depth", "status", "computed", "reported", "drift"} {
		if _, ok := assocs[0][k]; !ok {
			t.Errorf("association has no %q", k)
		}
	}
	var first, second, u12, p struct {
		Account, User, Parent string
		Depth                 int
		Computed, Reported    map[string]any
		Drift                 map[string]any
	}
	json.Unmarshal(mustMarshal(assocs[0]), &first)
	json.Unmarshal(mustMarshal(assocs[1]), &second)
	json.Unmarshal(mustMarshal(assocs[5]), &u12)
	json.Unmarshal(mustMarshal(assocs[15]), &p)
	if first.Account != "root" || first.User != "" || first.Depth != 0 || second.Account != "root" || second.User != "root" || second.Depth != 1 {
		t.Errorf("first rows %+v, %+v: want root and root's user row", first, second)
	}
	for _, k := range []string{"norm_shares", "raw_usage", "norm_usage", "effective_usage", "fairshare", "level_fs"} {
		if _, ok := first.Computed[k]; !ok {
			t.Errorf("computed has no %q", k)
		}
	}
	// Blank in sshare is null; an infinite LevelFS is "inf" and its drift 0.
	if first.Reported["norm_usage"] != nil || first.Drift["norm_usage"] != nil {
		t.Errorf("root norm_usage reported %v drift %v: want null", first.Reported["norm_usage"], first.Drift["norm_usage"])
	}
	if second.Reported["level_fs"] != "inf" || second.Computed["level_fs"] != "inf" || second.Drift["level_fs"] != 0.0 {
		t.Errorf("root user level_fs computed %v reported %v drift %v: want inf, inf, 0", second.Computed["level_fs"], second.Reported["level_fs"], second.Drift["level_fs"])
	}
	// Parent and depth as in the real tree, before FairShare=parent
	// flattening: u10's account p is a child of d.
	if u12.User != "u12" || u12.Parent != "b" || u12.Depth != 3 || p.Account != "p" || p.Parent != "d" || p.Depth != 2 {
		t.Errorf("u12 %+v, p %+v: want parents b and d at depths 3 and 2", u12, p)
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return testenv.WriteFile(t, dir, name, text) }
	good := "testdata/slurm-24.11/sshare-a-l-P.txt"
	// A FairShare changed by hand: drift, exit 1.
	tampered := write("tampered.txt", strings.Replace(string(readTestdata(t, "slurm-24.11/sshare-a-l-P.txt")), "|0.777778|", "|0.666667|", 1))
	malformed := write("malformed.txt", "Account|User|RawShares|NormShares|RawUsage\nroot|||0.000000|abc\n")
	// database mode's bad input, named before any database is opened
	db := []string{"check", "--dsn-file", write("dsn", "u:p@tcp(127.0.0.1:1)/db"), "--slurm-conf", "testdata/slurm-24.11/slurm.conf"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ok", []string{"check", "--sshare-file", good}, 0, ""},
		{"drift", []string{"check", "--sshare-file", tampered}, 1, ""},
		{"unknown flag", []string{"check", "--sshare-file", good, "--bogus"}, 2, "unknown flag"},
		{"no file", []string{"check", "--sshare-file", filepath.Join(dir, "missing")}, 2, "missing"},
		{"bad algorithm", []string{"check", "--sshare-file", good, "--algorithm", "fifo"}, 2, "fifo"},
		{"bad dampening", []string{"check", "--sshare-file", good, "--dampening-factor", "0"}, 2, "dampening"},
		{"auto without header", []string{"check", "--sshare-file", "testdata/slurm-24.11/sshare-a-l-P-n.txt"}, 2, "header"},
		{"malformed", []string{"check", "--sshare-file", malformed}, 2, "line 2"},
		{"no command", nil, 2, ""},
		{"read window backwards", append(db, "--sshare-file", good, "--at", "1764000010/1764000000"), 2, "END not before START"},
		{"read window half", append(db, "--sshare-file", good, "--at", "1764000000/"), 2, "START/END"},
		{"read window in exponent form", append(db, "--sshare-file", good, "--at", "1.764e9/1.765e9"), 2, "START/END"},
		{"slurmctld config without sshare file", append(db, "--slurmctld.config-file", good), 2, "--slurmctld.config-file: a live run asks slurmctld"},
		{"slurmctld config without BOOT_TIME", append(db, "--sshare-file", good, "--slurmctld.config-file", good), 2, "sshare-a-l-P.txt: no BOOT_TIME: expected the output of 'scontrol show config'"},
		{"explain: slurmctld config without --at", []string{"explain", "--user", "alice", "--slurmctld.config-file", good}, 2, "--slurmctld.config-file: a live run asks slurmctld; give it with --at"},
		{"explain: slurmctld config without BOOT_TIME", append([]string{"explain", "--user", "alice", "--at", "1764000000", "--slurmctld.config-file", good}, db[1:]...), 2, "sshare-a-l-P.txt: no BOOT_TIME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.msg) {
				t.Errorf("stderr %q does not mention %q", errOut, tc.msg)
			}
		})
	}
	if code, out, _ := runCLI(t, "--version"); code != 0 || !strings.HasPrefix(out, "slurmdbd_exporter ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

// TestDepthObliviousNote: the output says depth_oblivious is best effort.
func TestDepthObliviousNote(t *testing.T) {
	_, out, _ := runCLI(t, "check", "--sshare-file", "testdata/slurm-24.11/sshare-a-l-P-classic.txt", "--algorithm", "depth_oblivious", "--output", "json")
	var rep drift.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Algorithm != "depth_oblivious" || !strings.Contains(rep.Note, "best effort") {
		t.Errorf("algorithm %q note %q", rep.Algorithm, rep.Note)
	}
}
