// Package sshare reads what `sshare -P` prints and rebuilds the association
// tree from it. The format is src/sshare/process.c and
// src/common/print_fields.c of SchedMD/slurm, unchanged from 20.11 to 26.05:
// doubles as %f, blank for NO_VAL, "inf" for an infinite LevelFS, RawUsage
// truncated to an integer, "parent" for FairShare=parent, and the account
// name indented one space per level.
package sshare

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unique"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// UsageResolution is how far a reported RawUsage can be from slurmctld's:
// sshare prints usage_raw truncated to an integer, JSON as an integer.
const UsageResolution = 1

// Column names as sshare prints them in its header.
const (
	Account      = "Account"
	User         = "User"
	Partition    = "Partition"
	Cluster      = "Cluster"
	ID           = "ID"
	RawShares    = "RawShares"
	NormShares   = "NormShares"
	RawUsage     = "RawUsage"
	NormUsage    = "NormUsage"
	EffectvUsage = "EffectvUsage"
	FairShare    = "FairShare"
	LevelFS      = "LevelFS"
	GrpTRESMins  = "GrpTRESMins"
	GrpTRESRaw   = "GrpTRESRaw"
	TRESRunMins  = "TRESRunMins"
)

var known = []string{Account, Cluster, EffectvUsage, FairShare, GrpTRESMins, GrpTRESRaw, ID,
	LevelFS, NormShares, NormUsage, Partition, RawShares, RawUsage, TRESRunMins, User}

// Columns is the default column list of `sshare -a [-l] [-m]` for the
// algorithm (process.c): -l adds NormUsage, the TRES columns and, under
// Fair Tree, LevelFS; -m adds Partition after User.
func Columns(fairTree, long, partition bool) []string {
	c := []string{Account, User}
	if partition {
		c = append(c, Partition)
	}
	c = append(c, RawShares, NormShares, RawUsage)
	if long {
		c = append(c, NormUsage)
	}
	c = append(c, EffectvUsage, FairShare)
	if long {
		if fairTree {
			c = append(c, LevelFS)
		}
		c = append(c, GrpTRESMins, TRESRunMins)
	}
	return c
}

// ColumnsForCount picks the default layout with n fields for the algorithm,
// for output without a header (-n).
func ColumnsForCount(n int, fairTree bool) ([]string, error) {
	for _, long := range []bool{false, true} {
		for _, part := range []bool{false, true} {
			if c := Columns(fairTree, long, part); len(c) == n {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("%d fields is not a default sshare -P layout for this algorithm: expected the output of sshare -a -P with or without -l and -m", n)
}

// Row is one line of sshare output. Numbers that sshare left blank, and
// columns the output does not have, are NaN.
type Row struct {
	Line      int // 1-based line number in the input
	Depth     int // indentation level: root 0, a user one deeper than its account
	Account   string
	User      string
	Partition string
	Cluster   string
	// RawShares is fairshare.SharesParent for "parent"; HasShares is false
	// where the cell is blank (root).
	RawShares    uint32
	HasShares    bool
	NormShares   float64
	RawUsage     float64
	NormUsage    float64
	EffectvUsage float64
	FairShare    float64
	LevelFS      float64
	GrpTRESMins  string
	GrpTRESRaw   string
	TRESRunMins  string
}

// Output is a parsed sshare listing.
type Output struct {
	Columns []string
	// Header is true when the input had its header line.
	Header bool
	Rows   []Row
	// Release is Slurm's release from JSON output (meta.slurm.release).
	Release string
	// FactorMissing: classic-mode JSON from 23.11 to 25.05 reports every
	// FairShare as 0, so ParseJSON leaves it NaN for the caller to compute
	// as 2^(-EffectvUsage/NormShares/FairShareDampeningFactor).
	FactorMissing bool
}

// Has reports whether the output has the column.
func (o *Output) Has(col string) bool {
	for _, c := range o.Columns {
		if c == col {
			return true
		}
	}
	return false
}

// ErrNoHeader is returned when the input has no header line and no columns
// were given.
var ErrNoHeader = errors.New("sshare output has no header line (was it run with -n?)")

// maxLine bounds one line; sshare's longest cells are TRES lists.
const maxLine = 1 << 20

// Layout names the columns of output without a header, given the number of
// fields on its first line (see ColumnsForCount).
type Layout func(fields int) ([]string, error)

// ParseFile is Parse of a file with a header line; errors name the file.
func ParseFile(path string) (*Output, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := Parse(f, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Parse reads `sshare -P` (or -p) output. A header line, when present,
// names the columns; otherwise layout must name them, or Parse returns
// ErrNoHeader.
func Parse(r io.Reader, layout Layout) (*Output, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	type line struct {
		no     int
		fields []string
	}
	var lines []line
	for no := 1; sc.Scan(); no++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) != "" {
			lines = append(lines, line{no, strings.Split(text, "|")})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sshare line %d: %w", len(lines)+1, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("sshare output is empty: expected at least the root line")
	}
	// -p ends every line, the header included, with the separator.
	trailing := true
	for _, l := range lines {
		trailing = trailing && len(l.fields) > 1 && l.fields[len(l.fields)-1] == ""
	}
	out := &Output{}
	first := lines[0]
	if isHeader(first.fields) {
		fields := first.fields
		if trailing {
			fields = fields[:len(fields)-1]
		}
		cols, err := headerColumns(fields)
		if err != nil {
			return nil, fmt.Errorf("sshare line %d: %w", first.no, err)
		}
		out.Columns, out.Header = cols, true
		lines = lines[1:]
	} else {
		if layout == nil {
			return nil, ErrNoHeader
		}
		n := len(first.fields)
		var cols []string
		var err error
		if trailing {
			cols, err = layout(n - 1)
		}
		if !trailing || err != nil {
			trailing = false
			cols, err = layout(n)
		}
		if err != nil {
			return nil, fmt.Errorf("sshare line %d: %w", first.no, err)
		}
		out.Columns = cols
	}
	idx := index(out.Columns)
	if _, ok := idx[Account]; !ok {
		return nil, fmt.Errorf("sshare columns %v: expected an Account column", out.Columns)
	}
	out.Rows = make([]Row, 0, len(lines))
	for _, l := range lines {
		fields := l.fields
		if trailing {
			fields = fields[:len(fields)-1]
		}
		if len(fields) != len(out.Columns) {
			return nil, fmt.Errorf("sshare line %d: %d fields, expected %d (%s); a '|' inside a name cannot be told apart from the separator",
				l.no, len(fields), len(out.Columns), strings.Join(out.Columns, "|"))
		}
		row, err := parseRow(fields, idx)
		if err != nil {
			return nil, fmt.Errorf("sshare line %d: %w", l.no, err)
		}
		row.Line = l.no
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

func isHeader(fields []string) bool {
	return strings.EqualFold(strings.TrimSpace(fields[0]), Account) || strings.EqualFold(strings.TrimSpace(fields[0]), Cluster)
}

func headerColumns(fields []string) ([]string, error) {
	cols := make([]string, len(fields))
	seen := map[string]bool{}
	for i, f := range fields {
		name := canonical(strings.TrimSpace(f))
		if name == "" {
			return nil, fmt.Errorf("header column %d %q: expected one of %s", i+1, f, strings.Join(known, ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("header column %d: %s appears twice", i+1, name)
		}
		seen[name] = true
		cols[i] = name
	}
	if !seen[Account] {
		return nil, fmt.Errorf("header has no Account column")
	}
	return cols, nil
}

func canonical(s string) string {
	for _, k := range known {
		if strings.EqualFold(s, k) {
			return k
		}
	}
	return ""
}

func index(cols []string) map[string]int {
	m := make(map[string]int, len(cols))
	for i, c := range cols {
		m[c] = i
	}
	return m
}

func parseRow(f []string, idx map[string]int) (Row, error) {
	get := func(col string) (string, bool) {
		i, ok := idx[col]
		if !ok {
			return "", false
		}
		return f[i], true
	}
	var r Row
	acct, _ := get(Account)
	name := strings.TrimLeft(acct, " ")
	r.Depth = len(acct) - len(name)
	if name == "" {
		return r, fmt.Errorf("empty Account field: expected an account name")
	}
	// Kept strings are copies, and equal ones one copy (unique.Make):
	// substrings would keep every line alive, some 15 MB at 100k
	// associations, most of it TRES strings that repeat on every row.
	str := func(col string) string {
		v, _ := get(col)
		return unique.Make(v).Value()
	}
	r.Account = unique.Make(name).Value()
	r.User, r.Partition, r.Cluster = str(User), str(Partition), str(Cluster)
	r.GrpTRESMins, r.GrpTRESRaw, r.TRESRunMins = str(GrpTRESMins), str(GrpTRESRaw), str(TRESRunMins)
	if s, ok := get(RawShares); ok && s != "" {
		if s == "parent" {
			r.RawShares = fairshare.SharesParent
		} else {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return r, fmt.Errorf("RawShares %q: expected an unsigned integer or \"parent\"", s)
			}
			r.RawShares = uint32(v)
		}
		r.HasShares = true
	}
	for _, c := range []struct {
		col string
		dst *float64
	}{
		{NormShares, &r.NormShares}, {RawUsage, &r.RawUsage}, {NormUsage, &r.NormUsage},
		{EffectvUsage, &r.EffectvUsage}, {FairShare, &r.FairShare}, {LevelFS, &r.LevelFS},
	} {
		*c.dst = math.NaN()
		s, ok := get(c.col)
		if !ok || s == "" {
			continue
		}
		v, err := parseNumber(s)
		if err != nil {
			return r, fmt.Errorf("%s %q: %w", c.col, s, err)
		}
		if c.col == RawUsage && (v < 0 || math.IsInf(v, 0)) {
			return r, fmt.Errorf("%s %q: expected a finite number >= 0", c.col, s)
		}
		*c.dst = v
	}
	return r, nil
}

// parseNumber reads a %f value or "inf" as printed by glibc.
func parseNumber(s string) (float64, error) {
	switch s {
	case "inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+') {
			return 0, errors.New("expected a decimal number, inf or blank")
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("expected a decimal number, inf or blank")
	}
	return v, nil
}
