package sshare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Sentinels of data_parser v0.0.40/41, which write doubles as bare numbers:
// NO_VAL cast to double, and INFINITE64 cast to double (25.11's v0.0.41;
// 24.11 writes the token Infinity instead).
const (
	bareNoVal    = 4294967294.0
	bareInfinite = 18446744073709551616.0
)

// jsonRow is one element of shares.shares while it is read.
type jsonRow struct {
	shares.Row
	user          bool
	parentName    string // of an account row; a user row's is its Account
	factor, level float64
}

// decode fills r from one element of shares.shares.
func (r *jsonRow) decode(raw json.RawMessage) error {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		return fmt.Errorf("expected an object, got %s", excerpt(raw))
	}
	if err := r.decodeNames(f); err != nil {
		return err
	}
	if err := r.decodeValues(f); err != nil {
		return err
	}
	return r.decodeUsageShares(f)
}

// decodeNames reads the row's names and type: a user row's parent is
// its account, an account row's is its parent account.
func (r *jsonRow) decodeNames(f map[string]json.RawMessage) error {
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
	return nil
}

// decodeValues reads the normalized values and fairshare's factor and
// level, where data_parser's bare NO_VAL and INFINITE64 are blank and
// +Inf.
func (r *jsonRow) decodeValues(f map[string]json.RawMessage) error {
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
	return nil
}

// decodeUsageShares reads the raw usage (finite, >= 0) and the raw
// shares (an unsigned 32-bit integer, or none).
func (r *jsonRow) decodeUsageShares(f map[string]json.RawMessage) error {
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
