package sshare

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

const fairTreeL = `Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins
root|||0.000000|43756||1.000000||||cpu=0
 root|root|1|0.009901|0|0.000000|0.000000|1.000000|inf||cpu=0
 a||40|0.396040|15555|0.355495|0.355495||1.114051||cpu=0
  b||30|0.750000|10842|0.247789|0.697026||1.076000||cpu=0
   b|u1|1|1.000000|9425|0.215411|0.869333|0.777778|1.150308||cpu=0
   b|u12|parent|0.750000|1416|0.032378|0.130667|0.888889|||cpu=0
`

func TestParseHeader(t *testing.T) {
	out, err := Parse(strings.NewReader(fairTreeL), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Header || !out.Has(shares.LevelFS) || out.Has(shares.Partition) || len(out.Rows) != 6 {
		t.Fatalf("header %v columns %v rows %d", out.Header, out.Columns, len(out.Rows))
	}
	root, ru, u12 := out.Rows[0], out.Rows[1], out.Rows[5]
	if root.HasShares || !math.IsNaN(root.NormUsage) || root.RawUsage != 43756 || root.Depth != 0 || root.Line != 2 {
		t.Errorf("root %+v", root)
	}
	if ru.Account != "root" || ru.User != "root" || ru.Depth != 1 || !math.IsInf(ru.LevelFS, 1) || ru.FairShare != 1 {
		t.Errorf("root user %+v", ru)
	}
	if u12.RawShares != fairshare.SharesParent || !math.IsNaN(u12.LevelFS) || u12.Depth != 3 || u12.TRESRunMins != "cpu=0" {
		t.Errorf("u12 %+v", u12)
	}
	assocs, err := out.Associations()
	if err != nil {
		t.Fatal(err)
	}
	wantParents := []int{-1, 0, 0, 2, 3, 3}
	for i, a := range assocs {
		if a.Parent != wantParents[i] {
			t.Errorf("row %d parent %d, want %d", i, a.Parent, wantParents[i])
		}
	}
	if assocs[0].Shares != 1 {
		t.Errorf("root shares %d: want the database default 1 for the blank cell", assocs[0].Shares)
	}
}

func TestParseVariants(t *testing.T) {
	noHeader := strings.SplitN(fairTreeL, "\n", 2)[1]
	trailing := strings.ReplaceAll(fairTreeL, "\n", "|\n")
	crlf := strings.ReplaceAll(fairTreeL, "\n", "\r\n")
	ft := func(n int) ([]string, error) { return shares.ColumnsForCount(n, true) }
	for _, tc := range []struct {
		name   string
		in     string
		layout Layout
	}{
		{"no header, layout given", noHeader, ft},
		{"-p trailing separator", trailing, nil},
		{"-p without header", strings.SplitN(trailing, "\n", 2)[1], ft},
		{"CRLF", crlf, nil},
		{"blank lines", "\n" + fairTreeL + "\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Parse(strings.NewReader(tc.in), tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Rows) != 6 || out.Rows[4].User != "u1" || out.Rows[4].FairShare != 0.777778 || out.Rows[4].Depth != 3 {
				t.Errorf("rows %d, u1 %+v", len(out.Rows), out.Rows[4])
			}
		})
	}
	if _, err := Parse(strings.NewReader(noHeader), nil); err != ErrNoHeader {
		t.Errorf("no header, no layout: %v, want ErrNoHeader", err)
	}
}

func TestParseRealCaptures(t *testing.T) {
	for _, f := range []string{"../testdata/slurm-24.11/sshare-a-l-P-m.txt", "../testdata/slurm-25.11/sshare-a-l-P-classic.txt"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Parse(strings.NewReader(string(b)), nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(out.Rows) != 17 {
			t.Errorf("%s: %d rows", f, len(out.Rows))
		}
		if _, err := out.Associations(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestColumns(t *testing.T) {
	for _, tc := range []struct {
		fairTree, long, part bool
		want                 string
	}{
		{true, true, false, "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins"},
		{false, true, false, "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|GrpTRESMins|TRESRunMins"},
		{true, false, false, "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare"},
		{true, true, true, "Account|User|Partition|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins"},
	} {
		if got := strings.Join(shares.Columns(tc.fairTree, tc.long, tc.part), "|"); got != tc.want {
			t.Errorf("Columns(%v,%v,%v) = %s", tc.fairTree, tc.long, tc.part, got)
		}
	}
	if _, err := shares.ColumnsForCount(9, true); err == nil {
		t.Error("9 fields accepted as a Fair Tree layout")
	}
}

// TestParseErrors: every error names the line and what was expected.
func TestParseErrors(t *testing.T) {
	h := "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"short line", h + "root|||0.0|1\n", "line 2: 5 fields, expected 11"},
		{"bad number", h + "root|||x|1||1.0||||\n", "line 2: NormShares \"x\""},
		{"bad shares", h + "root||-3|0.0|1||1.0||||\n", "line 2: RawShares \"-3\""},
		{"negative usage", h + "root|||0.0|-1||1.0||||\n", "line 2: RawUsage"},
		{"unknown column", "Account|Bogus\n", "line 1: header column 2 \"Bogus\""},
		{"duplicate column", "Account|User|User\n", "appears twice"},
		{"no account name", h + "|||0.0|1||1.0||||\n", "empty Account field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAssociationsErrors(t *testing.T) {
	h := "Account|User|RawShares|NormShares|RawUsage|NormUsage|EffectvUsage|FairShare|LevelFS|GrpTRESMins|TRESRunMins\n"
	root := "root|||0.0|10||1.0||||\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"first not root", h + " a||1|0.5|1|0.1|0.1||1||\n", "line 2: first row"},
		{"two roots", h + root + "x|||0.0|10||1.0||||\n", "line 3: a second row at depth 0"},
		{"too deep", h + root + "   a||1|0.5|1|0.1|0.1||1||\n", "line 3: indented 3 spaces"},
		{"user under other account", h + root + " a||1|0.5|1|0.1|0.1||1||\n  b|u|1|1|1|0.1|1|1|1||\n", "line 4: user \"u\" of account \"b\" is indented under account \"a\""},
		{"blank shares", h + root + " a|||0.5|1|0.1|0.1||1||\n", "line 3: RawShares is blank"},
		{"blank usage", h + root + " a||1|0.5||0.1|0.1||1||\n", "line 3: RawUsage is blank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Parse(strings.NewReader(tc.in), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = out.Associations()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// FuzzParse: any input either fails with an error or yields rows that
// rebuild into a tree or fail cleanly; nothing panics.
func FuzzParse(f *testing.F) {
	f.Add(fairTreeL, false)
	f.Add(strings.SplitN(fairTreeL, "\n", 2)[1], true)
	f.Add(strings.ReplaceAll(fairTreeL, "\n", "|\n"), false)
	f.Add("Account|User|Partition|RawShares|RawUsage\nroot||||5\n root|root||parent|0\n", false)
	f.Fuzz(func(t *testing.T, in string, fairTree bool) {
		out, err := Parse(strings.NewReader(in), func(n int) ([]string, error) { return shares.ColumnsForCount(n, fairTree) })
		if err != nil {
			return
		}
		for _, r := range out.Rows {
			if r.Depth < 0 || r.Line < 1 || r.RawUsage < 0 {
				t.Fatalf("bad row %+v", r)
			}
		}
		assocs, err := out.Associations()
		if err != nil {
			return
		}
		tree, err := fairshare.NewTree(assocs)
		if err != nil {
			return
		}
		for _, v := range tree.FairTree() {
			if v.FairShare < 0 || v.FairShare > 1 {
				t.Fatalf("FairShare %v", v.FairShare)
			}
		}
		tree.Classic(fairshare.ClassicOptions{})
	})
}
