// Package sshare reads what `sshare -P` prints and rebuilds the association
// tree from it. The format is src/sshare/process.c and
// src/common/print_fields.c of SchedMD/slurm, unchanged from 20.11 to 26.05:
// doubles as %f, blank for NO_VAL, "inf" for an infinite LevelFS, RawUsage
// truncated to an integer, "parent" for FairShare=parent, and the account
// name indented one space per level.
package sshare

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// known are the header names Parse takes.
var known = []string{shares.Account, shares.Cluster, shares.EffectvUsage, shares.FairShare, shares.GrpTRESMins, shares.GrpTRESRaw, shares.ID,
	shares.LevelFS, shares.NormShares, shares.NormUsage, shares.Partition, shares.RawShares, shares.RawUsage, shares.TRESRunMins, shares.User}

// ErrNoHeader is returned when the input has no header line and no columns
// were given.
var ErrNoHeader = errors.New("sshare output has no header line (was it run with -n?)")

// Layout names the columns of output without a header, given the number of
// fields on its first line (see ColumnsForCount).
type Layout func(fields int) ([]string, error)

// ParseFile is Parse of a file with a header line; errors name the file.
func ParseFile(path string) (*shares.Table, error) {
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

// Parse reads `sshare -P` (or -p) output line by line, keeping only the
// rows. A header line, when present, names the columns; otherwise layout
// must name them, or Parse returns ErrNoHeader. The first line also tells
// whether every line ends with the separator (-p). A UTF-8 byte order mark
// is skipped. More than MaxBytes, MaxRows or maxLine bytes on a line is an
// error wrapping ErrTooLarge. A last line without its newline is an error
// too: sshare ends every line, and output cut short would read as drift.
func Parse(r io.Reader, layout Layout) (*shares.Table, error) {
	cut := false
	sc := bufio.NewScanner(limitBytes(r, MaxBytes))
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if atEOF && len(data) > 0 {
			cut = bytes.IndexByte(data, '\n') < 0
		}
		return bufio.ScanLines(data, atEOF)
	})
	out := &shares.Table{}
	var rows rowBlocks
	var idx map[string]int
	trailing, no := false, 0
	for sc.Scan() {
		no++
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if no == 1 {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return nil, fmt.Errorf("sshare line %d: a NUL byte: expected text, not binary content", no)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fields := strings.Split(string(line), "|")
		if idx == nil {
			header, err := startColumns(out, fields, layout)
			if err != nil {
				if err == ErrNoHeader {
					return nil, err
				}
				return nil, fmt.Errorf("sshare line %d: %w", no, err)
			}
			idx, trailing = index(out.Columns), len(fields) > len(out.Columns)
			if _, ok := idx[shares.Account]; !ok {
				return nil, fmt.Errorf("sshare columns %v: expected an Account column", out.Columns)
			}
			if header {
				continue
			}
		}
		if trailing {
			if fields[len(fields)-1] != "" {
				return nil, fmt.Errorf("sshare line %d: no '|' at the end: expected one as on the first line (sshare -p)", no)
			}
			fields = fields[:len(fields)-1]
		}
		if len(fields) != len(out.Columns) {
			return nil, fmt.Errorf("sshare line %d: %d fields, expected %d (%s); a '|' inside a name cannot be told apart from the separator",
				no, len(fields), len(out.Columns), strings.Join(out.Columns, "|"))
		}
		above := &shares.Row{}
		if rows.n > 0 {
			above = rows.at(rows.n - 1)
		}
		row, err := parseRow(fields, idx, above)
		if err == nil {
			row.Line = no
			err = rows.add(row)
		}
		if err != nil {
			return nil, fmt.Errorf("sshare line %d: %w", no, err)
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return nil, fmt.Errorf("sshare line %d: %w", no+1, tooLarge(maxLine, "bytes on a line"))
	case err != nil:
		return nil, fmt.Errorf("sshare line %d: %w", no+1, err)
	case idx == nil:
		return nil, fmt.Errorf("sshare output is empty: expected at least the root line")
	case cut:
		return nil, fmt.Errorf("sshare line %d: no newline at the end: the output was cut short (expected every line to end with one, as sshare writes them)", no)
	}
	out.Rows = rows.rows()
	return out, nil
}

// startColumns sets out's columns from the first line's fields, a header
// or (with the layout) a row, and reports which. A separator ending the
// line (-p) adds an empty field that is not a column.
func startColumns(out *shares.Table, fields []string, layout Layout) (header bool, err error) {
	trailing := len(fields) > 1 && fields[len(fields)-1] == ""
	if isHeader(fields) {
		if trailing {
			fields = fields[:len(fields)-1]
		}
		out.Columns, err = headerColumns(fields)
		out.Header = err == nil
		return true, err
	}
	if layout == nil {
		return false, ErrNoHeader
	}
	n := len(fields)
	if trailing {
		out.Columns, err = layout(n - 1)
	}
	if !trailing || err != nil {
		out.Columns, err = layout(n)
	}
	return false, err
}

func isHeader(fields []string) bool {
	return strings.EqualFold(strings.TrimSpace(fields[0]), shares.Account) || strings.EqualFold(strings.TrimSpace(fields[0]), shares.Cluster)
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
	if !seen[shares.Account] {
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

// parseRow parses the fields of a row; above is the row before it, whose
// strings it reuses.
func parseRow(f []string, idx map[string]int, above *shares.Row) (shares.Row, error) {
	get := func(col string) (string, bool) {
		i, ok := idx[col]
		if !ok {
			return "", false
		}
		return f[i], true
	}
	var r shares.Row
	acct, _ := get(shares.Account)
	name := strings.TrimLeft(acct, " ")
	r.Depth = len(acct) - len(name)
	if name == "" {
		return r, fmt.Errorf("empty Account field: expected an account name")
	}
	str := func(col, prev string) string {
		v, _ := get(col)
		return keep(v, prev)
	}
	r.Account = keep(name, above.Account)
	r.User, r.Partition, r.Cluster = str(shares.User, above.User), str(shares.Partition, above.Partition), str(shares.Cluster, above.Cluster)
	r.GrpTRESMins, r.GrpTRESRaw, r.TRESRunMins = str(shares.GrpTRESMins, above.GrpTRESMins), str(shares.GrpTRESRaw, above.GrpTRESRaw), str(shares.TRESRunMins, above.TRESRunMins)
	if s, ok := get(shares.RawShares); ok && s != "" {
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
		{shares.NormShares, &r.NormShares}, {shares.RawUsage, &r.RawUsage}, {shares.NormUsage, &r.NormUsage},
		{shares.EffectvUsage, &r.EffectvUsage}, {shares.FairShare, &r.FairShare}, {shares.LevelFS, &r.LevelFS},
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
		if c.col == shares.RawUsage && (v < 0 || math.IsInf(v, 0)) {
			return r, fmt.Errorf("%s %q: expected a finite number >= 0", c.col, s)
		}
		*c.dst = v
	}
	return r, nil
}

// keep copies v, so that a kept string does not keep its whole line
// alive, unless it equals above, a string kept before: account names,
// partitions and idle TRES strings repeat row after row (at 100k
// associations, substrings kept 15 MB). unique.Make would share more, but
// MaxRows rows of distinct names grow its map faster than the GC cleans
// it: a heap peak up to 234 MB against 162, in twice the time.
func keep(v, above string) string {
	if v == above {
		return above
	}
	return strings.Clone(v)
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
