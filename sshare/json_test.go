package sshare

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// The JSON captures (testdata/README.md says where they come from). Within
// a release, every file of one scenario was taken in the same second as the
// text files of that scenario (timestamps.txt of the captures).
func jsonCaptures(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"sshare-json*.json", "shares-*.json"} {
		m, err := filepath.Glob(filepath.Join("..", "testdata", "slurm-2*", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 46 {
		t.Fatalf("%d JSON captures in ../testdata: expected the 46 of 24.11 and 25.11", len(files))
	}
	return files
}

func parseJSONFile(t *testing.T, name string) *shares.Table {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func parseTextFile(t *testing.T, name string) *shares.Table {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Parse(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func scenario(file string) string {
	switch base := filepath.Base(file); {
	case strings.Contains(base, "classic"):
		return "classic"
	case strings.Contains(base, "limits"):
		return "limits"
	}
	return "fairtree"
}

func TestParseJSONCaptures(t *testing.T) {
	for _, f := range jsonCaptures(t) {
		out := parseJSONFile(t, f)
		release := map[string]string{"slurm-24.11": "24.11.7", "slurm-25.11": "25.11.7"}[filepath.Base(filepath.Dir(f))]
		classic := scenario(f) == "classic"
		rows := 17
		if b := filepath.Base(f); b == "sshare-json.json" || b == "sshare-json-classic.json" {
			rows = 9 // sshare --json without -a
		}
		switch {
		case out.Release != release:
			t.Errorf("%s: release %q, want %q", f, out.Release, release)
		case out.Has(shares.LevelFS) == classic:
			t.Errorf("%s: Fair Tree %v, want %v", f, out.Has(shares.LevelFS), !classic)
		case strings.Join(out.Columns, "|") != strings.Join(shares.Columns(!classic, true, true), "|"):
			t.Errorf("%s: columns %v", f, out.Columns)
		case out.FactorMissing != (classic && release == "24.11.7"):
			t.Errorf("%s: FactorMissing %v", f, out.FactorMissing)
		case len(out.Rows) != rows:
			t.Errorf("%s: %d rows, want %d", f, len(out.Rows), rows)
		}
		for i, r := range out.Rows {
			if r.Line != i+1 || r.Cluster == "" {
				t.Errorf("%s: row %d: %+v", f, i, r)
			}
		}
		if _, err := out.Associations(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestParseJSONMatchesText compares each JSON capture with the text
// capture of the same scenario and second: Fair Tree sshare-a-l-P-m.txt,
// classic sshare-a-l-P-m-classic.txt, limits sshare-a-l-P-limits.txt
// (Fair Tree, no -m). Allowed differences, from the captures' README
// (points 5, 9 and 10):
//   - the text prints %f and truncates RawUsage: values within 1e-6,
//     RawUsage within 1. That covers root's NormShares, 1/2^32 in Fair Tree
//     JSON and 0.000000 in the text.
//   - FairShare=parent user rows: LevelFS +Inf in JSON, blank in the text.
//   - 25.11 classic: JSON gives account rows the stored fs_factor, which
//     the text leaves blank; it equals 2^(-EffectvUsage/NormShares).
//   - 24.11 classic: JSON has no factor (FactorMissing, FairShare blank);
//     the text's is 2^(-EffectvUsage/NormShares), dampening 1, computed
//     from the JSON row.
//   - Cluster, GrpTRESMins and TRESRunMins: ParseJSON fills Cluster, the
//     text (no Cluster column) does not; ParseJSON leaves the TRES strings
//     empty.
func TestParseJSONMatchesText(t *testing.T) {
	text := map[string]string{"fairtree": "sshare-a-l-P-m.txt", "classic": "sshare-a-l-P-m-classic.txt", "limits": "sshare-a-l-P-limits.txt"}
	for _, f := range jsonCaptures(t) {
		t.Run(filepath.Join(filepath.Base(filepath.Dir(f)), filepath.Base(f)), func(t *testing.T) {
			js := parseJSONFile(t, f)
			txt := parseTextFile(t, filepath.Join(filepath.Dir(f), text[scenario(f)]))
			if js.Has(shares.LevelFS) != txt.Has(shares.LevelFS) {
				t.Fatalf("Fair Tree: JSON %v, text %v", js.Has(shares.LevelFS), txt.Has(shares.LevelFS))
			}
			byKey := map[[3]string]shares.Row{}
			for _, r := range txt.Rows {
				byKey[[3]string{r.Account, r.User, r.Partition}] = r
			}
			for i, j := range js.Rows {
				x, ok := byKey[[3]string{j.Account, j.User, j.Partition}]
				if !ok || len(js.Rows) == len(txt.Rows) && txt.Rows[i].Line != x.Line {
					t.Fatalf("JSON row %d %s/%s is not row %d of the text", j.Line, j.Account, j.User, i+1)
				}
				compareRows(t, js, j, x)
			}
			if len(js.Rows) != len(txt.Rows) {
				return // sshare --json without -a: a subset, checked above
			}
			ja, err := js.Associations()
			if err != nil {
				t.Fatal(err)
			}
			ta, err := txt.Associations()
			if err != nil {
				t.Fatal(err)
			}
			for i := range ja {
				a, b := ja[i], ta[i]
				if a.Account != b.Account || a.User != b.User || a.Partition != b.Partition || a.Shares != b.Shares || a.Parent != b.Parent || math.Abs(a.RawUsage-b.RawUsage) > 1 {
					t.Errorf("association %d: JSON %+v, text %+v", i, a, b)
				}
			}
		})
	}
}

func compareRows(t *testing.T, js *shares.Table, j, x shares.Row) {
	t.Helper()
	name := j.Account + "/" + j.User
	if j.Depth != x.Depth || j.RawShares != x.RawShares || j.HasShares != x.HasShares {
		t.Errorf("%s: depth %d shares %d/%v in JSON, %d %d/%v in text", name, j.Depth, j.RawShares, j.HasShares, x.Depth, x.RawShares, x.HasShares)
	}
	if math.Abs(j.RawUsage-x.RawUsage) > 1 {
		t.Errorf("%s: RawUsage %v in JSON, %v in text", name, j.RawUsage, x.RawUsage)
	}
	classicFactor := math.Pow(2, -j.EffectvUsage/j.NormShares)
	parentUser := j.User != "" && j.RawShares == fairshare.SharesParent
	for _, c := range []struct {
		col       string
		js, txt   float64
		allowedJS float64 // what JSON may hold where the text is blank; NaN: nothing
		textFrom  float64 // what the text holds where JSON is blank; NaN: nothing
	}{
		{shares.NormShares, j.NormShares, x.NormShares, math.NaN(), math.NaN()},
		{shares.NormUsage, j.NormUsage, x.NormUsage, math.NaN(), math.NaN()},
		{shares.EffectvUsage, j.EffectvUsage, x.EffectvUsage, math.NaN(), math.NaN()},
		{shares.LevelFS, j.LevelFS, x.LevelFS, pick(parentUser && js.Has(shares.LevelFS), math.Inf(1)), math.NaN()},
		{shares.FairShare, j.FairShare, x.FairShare, pick(!js.Has(shares.LevelFS) && js.Release == "25.11.7" && j.User == "", classicFactor), pick(js.FactorMissing, classicFactor)},
	} {
		switch {
		case math.IsNaN(c.js) && math.IsNaN(c.txt):
		case math.IsNaN(c.txt) && !math.IsNaN(c.allowedJS):
			if !near(c.js, c.allowedJS) {
				t.Errorf("%s: %s %v in JSON where the text is blank, want %v", name, c.col, c.js, c.allowedJS)
			}
		case math.IsNaN(c.js) && !math.IsNaN(c.textFrom):
			if !near(c.txt, c.textFrom) {
				t.Errorf("%s: %s %v in the text where JSON is blank, want %v", name, c.col, c.txt, c.textFrom)
			}
		case !near(c.js, c.txt):
			t.Errorf("%s: %s %v in JSON, %v in text", name, c.col, c.js, c.txt)
		}
	}
}

func pick(ok bool, v float64) float64 {
	if ok {
		return v
	}
	return math.NaN()
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-6
}

// TestParseJSONParsersAgree: within a release and a scenario every
// data_parser gives the same rows, bare numbers (v0.0.40/41, with
// Infinity or 2^64 for infinity) or {set,infinite,number} (v0.0.42 on).
// That includes 24.11 v0.0.40 = v0.0.41 and 25.11 v0.0.42 = v0.0.43 =
// v0.0.44.
func TestParseJSONParsersAgree(t *testing.T) {
	first := map[string]string{}
	for _, f := range jsonCaptures(t) {
		out := parseJSONFile(t, f)
		if len(out.Rows) != 17 {
			continue
		}
		key := filepath.Dir(f) + " " + scenario(f)
		if first[key] == "" {
			first[key] = f
			continue
		}
		ref := parseJSONFile(t, first[key])
		for i := range ref.Rows {
			if !sameRow(ref.Rows[i], out.Rows[i]) {
				t.Errorf("%s row %d: %+v\n%s: %+v", first[key], i+1, ref.Rows[i], f, out.Rows[i])
			}
		}
	}
	if len(first) != 6 {
		t.Errorf("%d release/scenario groups, want 6", len(first))
	}
}

func sameRow(a, b shares.Row) bool {
	for _, p := range [][2]*float64{{&a.NormShares, &b.NormShares}, {&a.RawUsage, &b.RawUsage}, {&a.NormUsage, &b.NormUsage},
		{&a.EffectvUsage, &b.EffectvUsage}, {&a.FairShare, &b.FairShare}, {&a.LevelFS, &b.LevelFS}} {
		if math.IsNaN(*p[0]) && math.IsNaN(*p[1]) {
			*p[0], *p[1] = 0, 0
		}
	}
	return a == b
}

func doc(rows ...string) string {
	return `{"shares":{"shares":[` + strings.Join(rows, ",") + `],"total_shares":0},"meta":{"slurm":{"release":"24.11.7"}},"errors":[],"warnings":[]}`
}

const (
	jsonRoot = `{"cluster":"c","name":"root","parent":"","shares":{"set":false,"infinite":false,"number":0},"usage":10,"effective_usage":{"set":true,"infinite":false,"number":1.0},"fairshare":{"factor":{"set":true,"infinite":false,"number":0.0},"level":{"set":false,"infinite":false,"number":0.0}},"type":["ASSOCIATION"]}`
	jsonUser = `{"cluster":"c","name":"u1","parent":"root","shares":{"set":true,"infinite":false,"number":1},"usage":10,"effective_usage":EU,"fairshare":{"factor":0.5,"level":1.0},"type":["USER"]}`
)

// TestParseJSONClassic: FactorMissing needs classic mode (every level set
// and 0), a release from 23.11 to 25.05 and every factor 0.
func TestParseJSONClassic(t *testing.T) {
	classicRoot := strings.Replace(jsonRoot, `"level":{"set":false`, `"level":{"set":true`, 1)
	user := func(factor string) string {
		return strings.NewReplacer("EU", "1.0", `"factor":0.5,"level":1.0`, `"factor":`+factor+`,"level":0.0`).Replace(jsonUser)
	}
	for _, tc := range []struct {
		name, in        string
		fairTree, miss  bool
		userFactorIsNaN bool
	}{
		{"24.11 zeros", doc(classicRoot, user("0.0")), false, true, true},
		{"24.11 with a factor", doc(classicRoot, user("0.3")), false, false, false},
		{"25.11 zeros", strings.Replace(doc(classicRoot, user("0.0")), "24.11.7", "25.11.7", 1), false, false, false},
		{"23.11", strings.Replace(doc(classicRoot, user("0.0")), "24.11.7", "23.11.1", 1), false, true, true},
		{"no release", strings.Replace(doc(classicRoot, user("0.0")), "24.11.7", "", 1), false, false, false},
		{"Fair Tree", doc(jsonRoot, user("0.0")), true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseJSON(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if out.Has(shares.LevelFS) != tc.fairTree || out.FactorMissing != tc.miss || math.IsNaN(out.Rows[1].FairShare) != tc.userFactorIsNaN {
				t.Errorf("Fair Tree %v, FactorMissing %v, user %+v", out.Has(shares.LevelFS), out.FactorMissing, out.Rows[1])
			}
			if !math.IsNaN(out.Rows[0].FairShare) || !tc.fairTree && !math.IsNaN(out.Rows[1].LevelFS) {
				t.Errorf("root %+v, user %+v: want root's FairShare and classic LevelFS blank", out.Rows[0], out.Rows[1])
			}
		})
	}
}

// TestParseJSONErrors: every error names where and what was expected.
func TestParseJSONErrors(t *testing.T) {
	capture, err := os.ReadFile("../testdata/slurm-25.11/shares-v0.0.44.json")
	if err != nil {
		t.Fatal(err)
	}
	user := func(eu string) string { return strings.Replace(jsonUser, "EU", eu, 1) }
	for _, tc := range []struct {
		name, in, want string
	}{
		{"truncated", string(capture[:len(capture)/2]), "shares JSON: unexpected end of JSON input"},
		{"not an object", `[1]`, "shares JSON: json: cannot unmarshal array"},
		{"errors", strings.Replace(doc(jsonRoot), `"errors":[]`, `"errors":[{"description":"Unable to query shares","error_number":2010,"error":"Invalid user","source":"_op_handler_shares"},{}]`, 1),
			"shares JSON: errors reported by Slurm (2), the first: Invalid user: Unable to query shares (error 2010) in _op_handler_shares"},
		{"odd error", strings.Replace(doc(jsonRoot), `"errors":[]`, `"errors":["boom"]`, 1), `the first: "boom"`},
		{"no shares", `{"meta":{},"errors":[]}`, "no rows in shares.shares"},
		{"wrong type", doc(jsonRoot, user(`"x"`)), `shares row 2 ("u1"): effective_usage: expected a number or {set,infinite,number}, got "x"`},
		{"struct without number", doc(jsonRoot, user(`{"set":true}`)), `shares row 2 ("u1"): effective_usage: expected a number or {set,infinite,number}, got {"set":true}`},
		{"row not object", doc(jsonRoot, `7`), "shares row 2: expected an object, got 7"},
		{"no type", doc(strings.Replace(jsonRoot, `"type":["ASSOCIATION"]`, `"type":"x"`, 1)), `shares row 1 ("root"): type: expected a list such as ["USER"], got "x"`},
		{"no name", doc(strings.Replace(jsonRoot, `"name":"root"`, `"name":""`, 1)), "shares row 1: name: expected a non-empty string"},
		{"name not string", doc(strings.Replace(jsonRoot, `"name":"root"`, `"name":5`, 1)), "shares row 1: name: expected a string, got 5"},
		{"negative usage", doc(strings.Replace(jsonRoot, `"usage":10`, `"usage":-1`, 1)), `shares row 1 ("root"): usage: expected a finite number >= 0, got -1`},
		{"bad shares", doc(jsonRoot, strings.Replace(user("1"), `"number":1}`, `"number":1.5}`, 1)), `shares row 2 ("u1"): shares: expected an unsigned 32-bit integer`},
		{"fairshare not object", doc(strings.Replace(jsonRoot, `"fairshare":{"factor"`, `"fairshare":1,"x":{"factor"`, 1)), "fairshare: expected {factor,level}, got 1"},
		{"orphan user", doc(jsonRoot, strings.Replace(user("1"), `"parent":"root"`, `"parent":""`, 1)), `shares row 2 ("u1"): user row without parent`},
		{"out of order", doc(jsonRoot, strings.Replace(user("1"), `"parent":"root"`, `"parent":"zz"`, 1)), `shares row 2 ("u1"): parent "zz" is not an account above it`},
		{"other cluster", doc(jsonRoot, strings.Replace(user("1"), `"cluster":"c"`, `"cluster":"d"`, 1)), `parent "root" is not an account above it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseJSONErrSlurm(t *testing.T) {
	_, err := ParseJSON(strings.NewReader(strings.Replace(doc(jsonRoot), `"errors":[]`, `"errors":[{}]`, 1)))
	if !errors.Is(err, ErrSlurm) || !strings.Contains(err.Error(), "the first: {}") {
		t.Errorf("error %v: want ErrSlurm", err)
	}
	if _, err := ParseJSON(strings.NewReader(`{`)); errors.Is(err, ErrSlurm) {
		t.Errorf("syntax error %v is ErrSlurm", err)
	}
}

// FuzzParseJSON: any input fails with an error or gives rows whose depths
// form a tree in sshare's order, the invariant Associations relies on.
func FuzzParseJSON(f *testing.F) {
	seen := map[string]bool{}
	for _, name := range jsonCaptures(f) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if s := fuzzSeed(f, b); !seen[string(s)] {
			seen[string(s)] = true
			f.Add(s)
		}
	}
	f.Add([]byte(doc(jsonRoot, strings.Replace(jsonUser, "EU", "Infinity", 1))))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := ParseJSON(bytes.NewReader(in))
		if err != nil {
			return
		}
		var stack []string // account names by depth
		for i, r := range out.Rows {
			if r.Line != i+1 || r.Depth < 0 || r.Depth > len(stack) || r.Depth == 0 && r.User != "" {
				t.Fatalf("row %d at depth %d under %v: %+v", i+1, r.Depth, stack, r)
			}
			if r.User != "" && stack[r.Depth-1] != r.Account {
				t.Fatalf("user row %d of account %q at depth %d under %v", i+1, r.Account, r.Depth, stack)
			}
			if r.User == "" {
				stack = append(stack[:r.Depth], r.Account)
			}
		}
		out.Associations()
	})
}
