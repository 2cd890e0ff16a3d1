package sshare

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
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
func ParseJSON(r io.Reader) (*shares.Table, error) {
	return parseJSON(r, MaxJSONBytes)
}

// ErrSlurm is wrapped by ParseJSON's error when the document's errors
// list is not empty: Slurm refused or failed the query.
var ErrSlurm = errors.New("errors reported by Slurm")

// parseJSON reads at most limit bytes of r, decoding shares.shares one
// element at a time: memory is bounded by the rows kept (MaxRows), not by
// the document. Any other value is at most maxLine bytes.
func parseJSON(r io.Reader, limit int64) (*shares.Table, error) {
	w := &window{r: &finiteReader{r: limitBytes(r, limit)}}
	d := &jsonDoc{dec: json.NewDecoder(w), w: w, out: &shares.Table{}, classic: true, allZero: true}
	err := d.document()
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, fmt.Errorf("shares JSON: %w", err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, errors.New("shares JSON: unexpected end of JSON input: expected the whole document")
	case err != nil:
		return nil, fmt.Errorf("shares JSON: %w: expected a {\"shares\":{\"shares\":[...]},\"meta\":{...},\"errors\":[...]} document", err)
	case d.nErrors > 0:
		return nil, fmt.Errorf("shares JSON: %w (%d), the first: %s", ErrSlurm, d.nErrors, slurmError(d.firstError))
	case d.rowErr != nil:
		return nil, d.rowErr
	case d.rows.n == 0:
		return nil, errors.New("shares JSON: no rows in shares.shares: expected at least the root association")
	}
	out := d.out
	out.Rows = d.rows.rows()
	// Fair Tree never computes the root's level (NO_VAL, blank in the text),
	// so its reports always hold a level that is not 0; classic mode sets
	// every level to 0.
	fairTree := !d.classic
	// Classic mode on 23.11 to 25.05 reports fs_factor 0 everywhere in JSON;
	// the text output computes it itself.
	out.FactorMissing = d.classic && d.allZero && releaseIn(out.Release, [2]int{23, 11}, [2]int{25, 5})
	out.Columns = shares.Columns(fairTree, true, true)
	for i := range out.Rows {
		r := &out.Rows[i] // FairShare and LevelFS hold fairshare.factor and level
		if !fairTree {
			r.LevelFS = math.NaN()
		}
		if out.FactorMissing || r.Depth == 0 || fairTree && r.User == "" {
			r.FairShare = math.NaN()
		}
	}
	return out, nil
}

// jsonDoc is the state of parseJSON. As json.Unmarshal did, the errors
// list, wherever it is, comes before a bad row, and a syntax error
// anywhere before both.
type jsonDoc struct {
	dec              *json.Decoder
	w                *window
	out              *shares.Table
	rows             rowBlocks
	stack            []int // account rows from the root down to the latest one
	classic, allZero bool
	sharesSeen       bool
	rowErr           error
	nErrors          int
	firstError       json.RawMessage
}

func (d *jsonDoc) document() error {
	err := d.object("the document", func(key string) error {
		switch key {
		case "shares":
			return d.object("shares", func(key string) error {
				if key != "shares" {
					return d.skip()
				}
				if d.sharesSeen {
					return errors.New("shares.shares appears twice: expected one list")
				}
				d.sharesSeen = true
				return d.list("shares.shares", d.row)
			})
		case "meta":
			var meta struct {
				Slurm struct {
					Release string `json:"release"`
				} `json:"slurm"`
			}
			err := d.value(&meta)
			d.out.Release = meta.Slurm.Release
			return err
		case "errors":
			return d.list("errors", func(raw json.RawMessage) error {
				if d.nErrors++; d.nErrors == 1 {
					d.firstError = raw
				}
				return nil
			})
		}
		return d.skip()
	})
	if err != nil {
		return err
	}
	switch tok, err := d.dec.Token(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return fmt.Errorf("after the document: %w", err)
	default:
		return fmt.Errorf("%v after the document: expected nothing", tok)
	}
}

// row adds one element of shares.shares, in tree order; the first bad one
// is kept as rowErr and the rest are only read. Only more than MaxRows
// ends the reading.
func (d *jsonDoc) row(raw json.RawMessage) error {
	if d.rowErr != nil {
		return nil
	}
	i := d.rows.n
	var r jsonRow
	if err := r.decode(raw); err != nil {
		d.rowErr = fmt.Errorf("shares row %d%s: %w", i+1, r.label(), err)
		return nil
	}
	r.Line = i + 1
	parent := r.Account
	if !r.user {
		parent = r.parentName
	}
	switch {
	case parent == "" && r.user:
		d.rowErr = fmt.Errorf("shares row %d%s: user row without parent: expected its account", i+1, r.label())
		return nil
	case parent != "":
		k := len(d.stack) - 1
		for k >= 0 && (d.rows.at(d.stack[k]).Account != parent || d.rows.at(d.stack[k]).Cluster != r.Cluster) {
			k--
		}
		if k < 0 {
			d.rowErr = fmt.Errorf("shares row %d%s: parent %q is not an account above it: expected the rows in tree order", i+1, r.label(), parent)
			return nil
		}
		r.Depth = k + 1
	}
	if !r.user {
		d.stack = append(d.stack[:r.Depth], i)
	}
	d.classic = d.classic && r.level == 0
	d.allZero = d.allZero && r.factor == 0
	r.FairShare, r.LevelFS = r.factor, r.level
	if err := d.rows.add(r.Row); err != nil {
		return fmt.Errorf("shares row %d: %w", i+1, err)
	}
	return nil
}

// token reads the next token; the window moves past it.
func (d *jsonDoc) token() (json.Token, error) {
	tok, err := d.dec.Token()
	d.w.mark = d.dec.InputOffset()
	return tok, err
}

// value decodes the next value, of at most maxLine bytes, into v.
func (d *jsonDoc) value(v any) error {
	err := d.dec.Decode(v)
	d.w.mark = d.dec.InputOffset()
	return err
}

// object reads an object, giving field each key with the decoder before
// its value, which field must read. null, which json.Unmarshal reads as
// nothing, is an empty object.
func (d *jsonDoc) object(what string, field func(key string) error) error {
	if ok, err := d.open('{', what); !ok {
		return err
	}
	for d.dec.More() {
		key, err := d.token()
		if err != nil {
			return err
		}
		if err := field(key.(string)); err != nil {
			return err
		}
	}
	_, err := d.token()
	return err
}

// list reads an array, giving elem each element; null is an empty array.
func (d *jsonDoc) list(what string, elem func(json.RawMessage) error) error {
	if ok, err := d.open('[', what); !ok {
		return err
	}
	for d.dec.More() {
		var raw json.RawMessage
		if err := d.value(&raw); err != nil {
			return err
		}
		if err := elem(raw); err != nil {
			return err
		}
	}
	_, err := d.token()
	return err
}

// skip reads a value it has no use for: Slurm's are small (warnings,
// total_shares).
func (d *jsonDoc) skip() error {
	var v json.RawMessage
	return d.value(&v)
}

// open reads the start of an object or array, and reports whether there
// is one: not for null.
func (d *jsonDoc) open(delim json.Delim, what string) (bool, error) {
	tok, err := d.token()
	switch {
	case err != nil:
		return false, err
	case tok == nil:
		return false, nil
	case tok != delim:
		return false, fmt.Errorf("json: cannot unmarshal %s into %s", kind(tok), what)
	}
	return true, nil
}

// kind names a token as json.Unmarshal's errors do.
func kind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('[') {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case bool:
		return "bool"
	}
	return "number"
}

// window fails a read more than maxLine bytes past mark, the decoder's
// offset after the last value or token: the decoder buffers a whole value
// before decoding it.
type window struct {
	r          io.Reader
	read, mark int64
}

func (w *window) Read(p []byte) (int, error) {
	room := w.mark + maxLine - w.read
	if room <= 0 {
		return 0, tooLarge(maxLine, "bytes in one JSON value")
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := w.r.Read(p)
	w.read += int64(n)
	return n, err
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
