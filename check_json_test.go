package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
)

// checkFile runs check --output json on file and decodes its report.
func checkFile(t *testing.T, file string, args ...string) (int, *drift.Report) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"check", "--sshare-file", file, "--output", "json"}, args...), &stdout, &stderr)
	if code == exitError {
		t.Fatalf("check --sshare-file %s exited %d: %s", file, code, stderr.String())
	}
	var rep drift.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%s: check --output json: %v\n%s", file, err, stdout.String())
	}
	return code, &rep
}

// sameNum: both blank, the same infinity, or within tol.
func sameNum(a, b drift.Num, tol float64) bool {
	x, y := float64(a), float64(b)
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.IsNaN(x) && math.IsNaN(y)
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		return x == y
	}
	return math.Abs(x-y) <= tol
}

func fields(v *drift.Values) []drift.Num {
	return []drift.Num{v.NormShares, v.RawUsage, v.NormUsage, v.EffectiveUsage, v.FairShare, v.LevelFS}
}

// beyond tells, per value, whether it drifts beyond what is allowed; a
// value either side left blank is not judged.
func beyond(e *drift.Entry) []bool {
	out := make([]bool, len(drift.Fields))
	if e.Drift == nil || e.Allowed == nil {
		return out
	}
	d, a := fields(e.Drift), fields(e.Allowed)
	for k := range out {
		out[k] = !math.IsNaN(float64(d[k])) && math.Abs(float64(d[k])) > float64(a[k])
	}
	return out
}

// sameResult: text and JSON of one capture give the same check: the same
// exit status, algorithm, counts and statuses, association by association
// the same computed values and the same values beyond tolerance, and the
// reported values agree to sshare's print precision. Values the text
// leaves blank and JSON carries (25.11 classic: the accounts' FairShare;
// Fair Tree: LevelFS of FairShare=parent rows) are not judged.
func sameResult(t *testing.T, textCode, jsonCode int, text, js *drift.Report) {
	t.Helper()
	if textCode != jsonCode || text.Algorithm != js.Algorithm || text.OK() != js.OK() {
		t.Errorf("exit %d, algorithm %s from the text; exit %d, algorithm %s from JSON", textCode, text.Algorithm, jsonCode, js.Algorithm)
	}
	for _, s := range drift.Statuses {
		if text.Summary.Counts[s] != js.Summary.Counts[s] {
			t.Errorf("%s: %d from the text, %d from JSON", s, text.Summary.Counts[s], js.Summary.Counts[s])
		}
	}
	if len(text.Associations) != len(js.Associations) {
		t.Fatalf("%d associations from the text, %d from JSON", len(text.Associations), len(js.Associations))
	}
	for i := range text.Associations {
		te, je := &text.Associations[i], &js.Associations[i]
		name := te.Account + "/" + te.User
		if te.Account != je.Account || te.User != je.User || te.Parent != je.Parent || te.Depth != je.Depth || te.Status != je.Status {
			t.Errorf("row %d: %s under %s at %d, %s from the text; %s/%s under %s at %d, %s from JSON",
				i+1, name, te.Parent, te.Depth, te.Status, je.Account, je.User, je.Parent, je.Depth, je.Status)
			continue
		}
		if !slices.Equal(te.Notes, je.Notes) {
			t.Errorf("%s notes %q from the text, %q from JSON", name, te.Notes, je.Notes)
		}
		if te.Computed == nil || je.Computed == nil {
			continue
		}
		tc, jc, tr, jr := fields(te.Computed), fields(je.Computed), fields(te.Reported), fields(je.Reported)
		tb, jb := beyond(te), beyond(je)
		for k, f := range drift.Fields {
			if !sameNum(tc[k], jc[k], 1e-12) {
				t.Errorf("%s %s computed %v from the text, %v from JSON", name, f, tc[k], jc[k])
			}
			if math.IsNaN(float64(tr[k])) {
				continue
			}
			// sshare prints 6 decimals and RawUsage as an integer
			if !sameNum(tr[k], jr[k], 5e-7) {
				t.Errorf("%s %s reported %v in the text, %v in JSON", name, f, tr[k], jr[k])
			}
			if tb[k] != jb[k] {
				t.Errorf("%s %s beyond tolerance: %v from the text, %v from JSON", name, f, tb[k], jb[k])
			}
		}
	}
}

// TestCheckSshareJSON: check --sshare-file reads `sshare --json` and
// slurmrestd /shares bodies of every data_parser version in the captures
// of 24.11 and 25.11, and each gives the check result of the text sshare
// printed in the same second. 24.11's classic JSON reports no factor: check
// computes it as serve does (FillMissingFactor). Before, JSON was refused
// (exit 2).
func TestCheckSshareJSON(t *testing.T) {
	n := 0
	for _, rel := range []string{"slurm-24.11", "slurm-25.11"} {
		for _, c := range []struct {
			text string
			json []string
		}{
			{"sshare-a-l-P-m.txt", []string{"sshare-json-a.json", "sshare-json-a-l-m.json", "sshare-json-a-v0.0.*[0-9].json", "shares-v0.0.*[0-9].json"}},
			{"sshare-a-l-P-m-classic.txt", []string{"sshare-json-a-classic.json", "sshare-json-a-l-m-classic.json", "sshare-json-a-v0.0.*-classic.json", "shares-v0.0.*-classic.json"}},
			{"sshare-a-l-P-limits.txt", []string{"sshare-json-a-limits.json", "shares-v0.0.*-limits.json"}},
		} {
			textFile := filepath.Join("testdata", rel, c.text)
			textCode, text := checkFile(t, textFile)
			for _, pat := range c.json {
				files, err := filepath.Glob(filepath.Join("testdata", rel, pat))
				if err != nil || len(files) == 0 {
					t.Fatalf("%s in testdata/%s: %v, no file", pat, rel, err)
				}
				for _, f := range files {
					n++
					t.Run(rel+"/"+filepath.Base(f), func(t *testing.T) {
						code, js := checkFile(t, f)
						sameResult(t, textCode, code, text, js)
					})
				}
			}
		}
	}
	if n != 42 {
		t.Errorf("%d JSON captures compared: want the 42 of 24.11 and 25.11 taken with -a", n)
	}
}

// TestCheckSshareJSONInput: JSON is told from text by its first byte
// other than a BOM or white space, whatever --algorithm says; the
// algorithm still decides the replay; --dampening-factor goes into the
// factor that 24.11's classic JSON leaves out; bad JSON is an error (exit
// 2) naming the file.
func TestCheckSshareJSONInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	body, err := os.ReadFile("testdata/slurm-25.11/shares-v0.0.44.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"BOM", append([]byte("\ufeff"), body...)},
		{"blank lines first", append([]byte("\n \r\n\t"), body...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, rep := checkFile(t, write(tc.name+".json", tc.b))
			if code != 0 || rep.Algorithm != "fair_tree" || len(rep.Associations) != 17 {
				t.Errorf("exit %d, %s, %d associations: want 0, fair_tree, 17", code, rep.Algorithm, len(rep.Associations))
			}
		})
	}
	if _, rep := checkFile(t, write("ft.json", body), "--algorithm", "classic"); rep.Algorithm != "classic" {
		t.Errorf("--algorithm classic replayed %s", rep.Algorithm)
	}

	// 24.11 classic JSON: factor 0 everywhere, computed from the row's own
	// numbers with --dampening-factor
	_, rep := checkFile(t, "testdata/slurm-24.11/sshare-json-a-l-m-classic.json", "--dampening-factor", "2")
	filled := 0
	for _, e := range rep.Associations {
		r := e.Reported
		want := math.Exp2(-float64(r.EffectiveUsage) / float64(r.NormShares) / 2)
		if r.NormShares <= 0 {
			want = 0
		}
		if !sameNum(r.FairShare, drift.Num(want), 1e-15) {
			t.Errorf("%s/%s: fairshare %v, want 2^(-%v/%v/2) = %v", e.Account, e.User, r.FairShare, r.EffectiveUsage, r.NormShares, want)
		}
		filled++
	}
	if filled != 17 {
		t.Errorf("%d rows filled, want 17", filled)
	}

	cut := write("cut.json", body[:len(body)/2])
	bad := write("bad.json", bytes.Replace(body, []byte(`"name"`), []byte(`"nom"`), 1))
	for _, tc := range []struct{ file, msg string }{
		{cut, "cut.json: shares JSON: unexpected end of JSON input"},
		{bad, "bad.json: shares row 1: name: expected a non-empty string"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"check", "--sshare-file", tc.file}, &stdout, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("exit %d, stderr %q: want exit 2 and %q", code, stderr.String(), tc.msg)
		}
	}
}

// TestCheckJSONFailure: check --output json that cannot answer (exit 2)
// prints one JSON object, {"error", "exit_code": 2}, on stdout and nothing
// else, and the error on stderr too: whether kong refused the command
// line, the input was bad, the database could not be reached, or a series
// failed after some of its snapshots were checked.
func TestCheckJSONFailure(t *testing.T) {
	dir := t.TempDir()
	good := "testdata/slurm-24.11/sshare-a-l-P.txt"
	capture := string(readTestdata(t, "slurm-24.11/sshare-a-l-P.txt"))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("malformed.txt", "Account|User|RawShares|NormShares|RawUsage\nroot|||0.000000|abc\n")
	backwards := write("series.txt", "## 1764000000\n"+capture+"## 1764000060\n"+capture+"## 1764000030\n"+capture)
	// nothing listens on port 1: the database is unreachable
	dsn := write("dsn", "u:p@tcp(127.0.0.1:1)/db")
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"unknown flag", []string{"--sshare-file", good, "--bogus"}, "unknown flag"},
		{"no file", []string{"--sshare-file", filepath.Join(dir, "missing")}, "missing"},
		{"bad dampening", []string{"--sshare-file", good, "--dampening-factor", "0"}, "dampening"},
		{"malformed", []string{"--sshare-file", malformed}, "line 2"},
		{"series out of order", []string{"--sshare-file", backwards}, "time order"},
		{"database unreachable", []string{"--sshare-file", good, "--dsn-file", dsn, "--slurm-conf", "testdata/slurm-24.11/slurm.conf", "--db.timeout", "3s"}, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"check", "--output", "json"}, tc.args...)...)
			if code != exitError {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, exitError, stdout, stderr)
			}
			dec := json.NewDecoder(strings.NewReader(stdout))
			dec.DisallowUnknownFields()
			var f struct {
				Error    string `json:"error"`
				ExitCode *int   `json:"exit_code"`
			}
			if err := dec.Decode(&f); err != nil || dec.More() {
				t.Fatalf("stdout is not one JSON error object (%v):\n%s", err, stdout)
			}
			if f.ExitCode == nil || *f.ExitCode != exitError || !strings.Contains(f.Error, tc.msg) {
				t.Errorf("stdout %s: want exit_code %d and an error naming %q", stdout, exitError, tc.msg)
			}
			if !strings.Contains(stderr, tc.msg) {
				t.Errorf("stderr %q does not name %q", stderr, tc.msg)
			}
		})
	}
}
