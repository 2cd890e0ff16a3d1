package sshare

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// ReadAny reads what Slurm reported, streamed and within this package's
// limits (MaxBytes, MaxRows; for JSON MaxJSONBytes, and memory bounded by
// the rows): `sshare -a -l -P` text or, when its first byte other than a
// BOM or white space is '{', `sshare --json` or a slurmrestd /shares
// body. Text without a header takes its columns from layout (nil: the
// header is required, ErrNoHeader). Output cut short or listing an
// association twice is an error: compared, it would read as drift. Errors
// start with name. The caller fills a FactorMissing report's factor.
func ReadAny(r io.Reader, name string, layout Layout) (*shares.Table, error) {
	br := bufio.NewReader(r)
	var out *shares.Table
	var err error
	if bom, ok := startsJSON(br); ok {
		br.Discard(bom)
		out, err = ParseJSON(br)
	} else {
		out, err = Parse(br, layout)
	}
	if err == nil {
		err = out.Unique()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// startsJSON reports whether the first byte of br after a UTF-8 BOM and
// white space is '{', looking no further than br's buffer, and how long
// the BOM is. Nothing is read: the text parser counts blank lines.
func startsJSON(br *bufio.Reader) (bom int, ok bool) {
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		bom = 3
	}
	for i := bom; i < br.Size(); i++ {
		b, err := br.Peek(i + 1)
		if err != nil {
			return 0, false
		}
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return bom, true
		}
		return 0, false
	}
	return 0, false
}

// Snapshot is one report of a series file.
type Snapshot struct {
	File string
	// Line is that of its '## <unix seconds>' line; 0: the whole file.
	Line int
	At   time.Time // the '##' line's moment; zero: unknown
	// Label names the snapshot in errors: the file, or the file and its
	// '##' line.
	Label string
	// Table is what it reported; nil when the snapshot is Empty: only
	// white space (sshare failed in the loop that wrote the file).
	Table *shares.Table
	Empty bool
}

// Series reads one file of what Slurm reported: one listing (ReadAny), or
// snapshots each headed by a line '## <unix seconds>' (as
// 'echo "## $(date +%s)"' writes), streamed in the order written: a
// listing of MaxBytes every 30 s for a day is 180 GB. It stops at the
// first error, yielded with the snapshot it concerns (its Label).
func Series(name string, layout Layout) iter.Seq2[Snapshot, error] {
	return func(yield func(Snapshot, error) bool) {
		f, err := os.Open(name)
		if err != nil {
			yield(Snapshot{File: name, Label: name}, err)
			return
		}
		defer f.Close()
		br := bufio.NewReader(f)
		skip, ok := startsSeries(br)
		if !ok {
			snap := Snapshot{File: name, Label: name}
			snap.Table, err = ReadAny(br, name, layout)
			yield(snap, err)
			return
		}
		lead, _ := br.Peek(skip)
		br.Discard(skip)
		readMarked(br, name, 1+strings.Count(string(lead), "\n"), layout, yield)
	}
}

// readMarked reads the snapshots of a series file from its first '##'
// line, line.
func readMarked(br *bufio.Reader, name string, line int, layout Layout, yield func(Snapshot, error) bool) {
	for {
		mark, err := br.ReadSlice('\n')
		if len(mark) == 0 && err == io.EOF {
			return
		}
		if err != nil && err != io.EOF {
			yield(Snapshot{File: name, Line: line, Label: name}, fmt.Errorf("%s line %d: %w", name, line, err))
			return
		}
		sec, perr := parseMark(mark)
		if perr != nil {
			yield(Snapshot{File: name, Line: line, Label: name}, fmt.Errorf("%s line %d: %w", name, line, perr))
			return
		}
		seg := &segment{br: br, lineStart: true}
		body := bufio.NewReader(seg)
		snap := Snapshot{File: name, Line: line, At: time.Unix(sec, 0).UTC(), Label: fmt.Sprintf("%s, snapshot at line %d (## %d)", name, line, sec)}
		var rerr error
		if snap.Empty = blank(body); !snap.Empty {
			snap.Table, rerr = ReadAny(body, snap.Label, layout)
		}
		if !yield(snap, rerr) || rerr != nil {
			return
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			yield(snap, fmt.Errorf("%s: %w", snap.Label, err))
			return
		}
		line += 1 + seg.lines
		if err == io.EOF {
			return
		}
	}
}

// startsSeries reports whether br, after a UTF-8 BOM and blank lines,
// starts with a '##' line, and how many bytes come before it, looking no
// further than br's buffer.
func startsSeries(br *bufio.Reader) (skip int, ok bool) {
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		skip = 3
	}
	for i := skip; i+2 <= br.Size(); i++ {
		b, err := br.Peek(i + 2)
		if err != nil {
			return 0, false
		}
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			if b[i] == '\n' {
				skip = i + 1
			}
			continue
		}
		return skip, i == skip && b[i] == '#' && b[i+1] == '#'
	}
	return 0, false
}

// parseMark reads a '## <unix seconds>' line.
func parseMark(line []byte) (int64, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "##")
	sec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%q: expected '## <unix seconds>' heading a snapshot (as 'echo \"## $(date +%%s)\"' writes)", strings.TrimSpace(string(line)))
	}
	return sec, nil
}

// segment reads br up to the next line that starts with "##" (the next
// snapshot's heading), counting the lines it gives.
type segment struct {
	br        *bufio.Reader
	lineStart bool
	done      bool
	lines     int
}

func (s *segment) Read(p []byte) (int, error) {
	if s.done || len(p) == 0 {
		if s.done {
			return 0, io.EOF
		}
		return 0, nil
	}
	if s.lineStart {
		if b, _ := s.br.Peek(2); string(b) == "##" {
			s.done = true
			return 0, io.EOF
		}
	}
	if _, err := s.br.Peek(1); err != nil {
		return 0, err
	}
	buf, _ := s.br.Peek(s.br.Buffered())
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i+1]
	}
	n := copy(p, buf)
	s.br.Discard(n)
	s.lineStart = p[n-1] == '\n'
	if s.lineStart {
		s.lines++
	}
	return n, nil
}

// blank reports whether br holds only white space, looking no further
// than its buffer (a longer prefix of white space counts as content).
func blank(br *bufio.Reader) bool {
	for i := 0; i < br.Size(); i++ {
		b, err := br.Peek(i + 1)
		if len(b) <= i {
			return err != nil
		}
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return false
	}
	return false
}
