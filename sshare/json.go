package sshare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Sentinels of data_parser v0.0.40/41, which write doubles as bare numbers:
// NO_VAL cast to double, and INFINITE64 cast to double (25.11's v0.0.41;
// 24.11 writes the token Infinity instead).
const (
	bareNoVal    = 4294967294.0
	bareInfinite = 18446744073709551616.0
)

// ParseJSON reads the JSON form of the shares: `sshare --json` or the
// body of slurmrestd's GET /slurm/v0.0.N/shares. Rows are filled as Parse
// fills them from `sshare -a -l -P -m`, with these rules:
//   - Row.Line is the 1-based index of the row in shares.shares.
//   - Depth follows the parent chain; rows must be in tree order, as Slurm
//     writes them.
//   - FairShare is NaN on the root, whose fs_factor slurmctld never
//     computes (JSON carries its initial 0), and under Fair Tree on every
//     account row, as sshare prints it. Classic 25.11 keeps the factor JSON
//     gives account rows although its text output leaves them blank.
//   - LevelFS is NaN in classic mode, which has no LevelFS column, and +Inf
//     on FairShare=parent rows where the text prints a blank.
//   - GrpTRESMins, GrpTRESRaw and TRESRunMins are left empty.
//
// Columns are those of `sshare -a -l -m`, with LevelFS when the report is
// Fair Tree: unless every row's fairshare.level is set and 0 (see
// parseJSON). Release is meta.slurm.release, and FactorMissing is set as
// Output documents. A non-empty errors list is an error wrapping ErrSlurm.
func ParseJSON(r io.Reader) (*Output, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading shares JSON: %w", err)
	}
	return parseJSON(b)
}

// ErrSlurm is wrapped by ParseJSON's error when the document's errors
// list is not empty: Slurm refused or failed the query.
var ErrSlurm = errors.New("errors reported by Slurm")

type jsonRow struct {
	Row
	user          bool
	parentName    string // of an account row; a user row's is its Account
	factor, level float64
}

func parseJSON(b []byte) (*Output, error) {
	var doc struct {
		Shares *struct {
			Shares []json.RawMessage `json:"shares"`
		} `json:"shares"`
		Meta struct {
			Slurm struct {
				Release string `json:"release"`
			} `json:"slurm"`
		} `json:"meta"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(finite(b), &doc); err != nil {
		return nil, fmt.Errorf("shares JSON: %w: expected a {\"shares\":{\"shares\":[...]},\"meta\":{...},\"errors\":[...]} document", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("shares JSON: %w (%d), the first: %s", ErrSlurm, len(doc.Errors), slurmError(doc.Errors[0]))
	}
	if doc.Shares == nil || len(doc.Shares.Shares) == 0 {
		return nil, errors.New("shares JSON: no rows in shares.shares: expected at least the root association")
	}
	rows := make([]jsonRow, len(doc.Shares.Shares))
	var stack []int // account rows from the root down to the latest one
	classic := true
	allZero := true
	for i, raw := range doc.Shares.Shares {
		r := &rows[i]
		if err := r.decode(raw); err != nil {
			return nil, fmt.Errorf("shares row %d%s: %w", i+1, r.label(), err)
		}
		r.Line = i + 1
		parent := r.Account
		if !r.user {
			parent = r.parentName
		}
		switch {
		case parent == "" && r.user:
			return nil, fmt.Errorf("shares row %d%s: user row without parent: expected its account", i+1, r.label())
		case parent != "":
			d := len(stack) - 1
			for d >= 0 && (rows[stack[d]].Account != parent || rows[stack[d]].Cluster != r.Cluster) {
				d--
			}
			if d < 0 {
				return nil, fmt.Errorf("shares row %d%s: parent %q is not an account above it: expected the rows in tree order", i+1, r.label(), parent)
			}
			r.Depth = d + 1
		}
		if !r.user {
			stack = append(stack[:r.Depth], i)
		}
		classic = classic && r.level == 0
		allZero = allZero && r.factor == 0
	}
	out := &Output{Release: doc.Meta.Slurm.Release, Rows: make([]Row, len(rows))}
	// Fair Tree never computes the root's level (NO_VAL, blank in the text),
	// so its reports always hold a level that is not 0; classic mode sets
	// every level to 0.
	fairTree := !classic
	// Classic mode on 23.11 to 25.05 reports fs_factor 0 everywhere in JSON;
	// the text output computes it itself.
	out.FactorMissing = classic && allZero && releaseIn(out.Release, [2]int{23, 11}, [2]int{25, 5})
	out.Columns = Columns(fairTree, true, true)
	for i := range rows {
		r := &rows[i]
		r.FairShare, r.LevelFS = r.factor, math.NaN()
		if fairTree {
			r.LevelFS = r.level
		}
		if out.FactorMissing || r.Depth == 0 || fairTree && !r.user {
			r.FairShare = math.NaN()
		}
		out.Rows[i] = r.Row
	}
	return out, nil
}

// decode fills r from one element of shares.shares.
func (r *jsonRow) decode(raw json.RawMessage) error {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		return fmt.Errorf("expected an object, got %s", excerpt(raw))
	}
	var name, parent string
	for _, s := range []struct {
		key string
		dst *string
	}{{"name", &name}, {"parent", &parent}, {"cluster", &r.Cluster}, {"partition", &r.Partition}} {
		if v := f[s.key]; v != nil && string(v) != "null" {
			if err := json.Unmarshal(v, s.dst); err != nil {
				return fmt.Errorf("%s: expected a string, got %s", s.key, excerpt(v))
			}
		}
	}
	if name == "" {
		return errors.New("name: expected a non-empty string")
	}
	r.Account = name // names the row in errors until the type tells
	var types []string
	if err := json.Unmarshal(f["type"], &types); err != nil || types == nil {
		return fmt.Errorf("type: expected a list such as [\"USER\"], got %s", excerpt(f["type"]))
	}
	for _, t := range types {
		r.user = r.user || strings.Contains(t, "USER")
	}
	if r.user {
		r.Account, r.User = parent, name
	} else {
		r.Account, r.parentName = name, parent
	}

	var fs map[string]json.RawMessage
	if v := f["fairshare"]; v != nil {
		if err := json.Unmarshal(v, &fs); err != nil {
			return fmt.Errorf("fairshare: expected {factor,level}, got %s", excerpt(v))
		}
	}
	for _, d := range []struct {
		key string
		raw json.RawMessage
		dst *float64
	}{
		{"shares_normalized", f["shares_normalized"], &r.NormShares},
		{"usage_normalized", f["usage_normalized"], &r.NormUsage},
		{"effective_usage", f["effective_usage"], &r.EffectvUsage},
		{"fairshare.factor", fs["factor"], &r.factor},
		{"fairshare.level", fs["level"], &r.level},
	} {
		v, bare, err := number(d.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", d.key, err)
		}
		if bare && v == bareNoVal {
			v = math.NaN()
		} else if bare && v == bareInfinite {
			v = math.Inf(1)
		}
		*d.dst = v
	}

	usage, _, err := number(f["usage"])
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if usage < 0 || math.IsInf(usage, 0) {
		return fmt.Errorf("usage: expected a finite number >= 0, got %s", excerpt(f["usage"]))
	}
	r.RawUsage = usage

	shares, _, err := number(f["shares"])
	switch {
	case err != nil:
		return fmt.Errorf("shares: %w", err)
	case math.IsNaN(shares):
	case shares < 0 || shares > math.MaxUint32 || shares != math.Trunc(shares):
		return fmt.Errorf("shares: expected an unsigned 32-bit integer, got %s", excerpt(f["shares"]))
	default:
		r.RawShares, r.HasShares = uint32(shares), true
	}
	return nil
}

// label names the row in errors once its name is known.
func (r *jsonRow) label() string {
	switch {
	case r.User != "":
		return fmt.Sprintf(" (%q)", r.User)
	case r.Account != "":
		return fmt.Sprintf(" (%q)", r.Account)
	}
	return ""
}

// number reads a value written as a bare number (v0.0.40/41) or as
// {set, infinite, number} (v0.0.42 on): infinite is +Inf, unset NaN. An
// absent value or null is NaN too. bare tells the caller that Slurm's
// sentinels may stand in for unset and infinite.
func number(raw json.RawMessage) (v float64, bare bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return math.NaN(), false, nil
	}
	if raw[0] == '{' {
		var s struct {
			Set, Infinite bool
			Number        json.RawMessage
		}
		if json.Unmarshal(raw, &s) == nil {
			switch {
			case s.Infinite:
				return math.Inf(1), false, nil
			case !s.Set:
				return math.NaN(), false, nil
			}
			if v, ok := bareNumber(s.Number); ok {
				return v, false, nil
			}
		}
	} else if v, ok := bareNumber(raw); ok {
		return v, true, nil
	}
	return 0, false, fmt.Errorf("expected a number or {set,infinite,number}, got %s", excerpt(raw))
}

// bareNumber parses a JSON number token; finite's stand-ins for infinity
// overflow to ±Inf.
func bareNumber(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil || errors.Is(err, strconv.ErrRange)
}

// finite makes the JSON of data_parser v0.0.40/41 valid: they write
// non-finite doubles as the bare tokens Infinity, -Infinity and NaN. Outside
// strings, Infinity becomes 1e999999 (same length, so error offsets still
// match), which bareNumber reads as +Inf, and NaN becomes null.
func finite(b []byte) []byte {
	var out []byte
	last, inString, escaped := 0, false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == 'I' && bytes.HasPrefix(b[i:], []byte("Infinity")):
			out = append(append(out, b[last:i]...), "1e999999"...)
			i += len("Infinity") - 1
			last = i + 1
		case c == 'N' && bytes.HasPrefix(b[i:], []byte("NaN")):
			out = append(append(out, b[last:i]...), "null"...)
			i += len("NaN") - 1
			last = i + 1
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// slurmError describes one element of the errors list
// ({description, error_number, error, source}).
func slurmError(raw json.RawMessage) string {
	var e struct {
		Description string `json:"description"`
		Number      int    `json:"error_number"`
		Error       string `json:"error"`
		Source      string `json:"source"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Description == "" && e.Error == "" {
		return excerpt(raw)
	}
	var parts []string
	for _, p := range []string{e.Error, e.Description} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	s := strings.Join(parts, ": ")
	if e.Number != 0 {
		s += fmt.Sprintf(" (error %d)", e.Number)
	}
	if e.Source != "" {
		s += " in " + e.Source
	}
	return s
}

// releaseIn reports whether release ("24.11.7") is within [lo, hi] by
// major and minor version.
func releaseIn(release string, lo, hi [2]int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	v := major*100 + minor
	return v >= lo[0]*100+lo[1] && v <= hi[0]*100+hi[1]
}

// excerpt quotes the start of a JSON value for an error message.
func excerpt(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	if b.Len() > 40 {
		return strings.ToValidUTF8(string(b.Bytes()[:40]), "") + "..."
	}
	return b.String()
}
