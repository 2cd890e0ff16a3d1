package sshare

import (
	"errors"
	"fmt"
	"io"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// Limits on what this package reads, from a child, a file or slurmrestd,
// so that a misbehaving source cannot exhaust memory. The product's scale
// target is 100,000 associations: 14 MB of `sshare -a -l -P -m` text, and
// some 5 kB a row of JSON (eight TRES; more TRES, more bytes). A parsed
// Row is 184 bytes, so MaxRows rows are 74 MB (kept in rowBlocks), and
// their strings at most MaxBytes: the heap peaked at 100 MB for a flood
// of MaxRows rows, 165 MB with every name distinct. Past a limit the read
// stops with an error wrapping ErrTooLarge, and a child is killed at once.
const (
	// MaxRows bounds the rows of one listing: four times the scale target.
	MaxRows = 400_000
	// MaxBytes bounds sshare's text output (and scontrol's, and what a
	// child writes to stderr): four times the scale target's 14 MB.
	MaxBytes = 64 << 20
	// MaxJSONBytes bounds a JSON document. It is decoded element by
	// element, so it bounds time, not memory: four times the scale
	// target's 500 MB.
	MaxJSONBytes = 2 << 30
	// maxLine bounds one line of text, and one JSON value: an element of
	// shares.shares or any value outside it. sshare's longest cells are
	// TRES lists, some hundred bytes.
	maxLine = 1 << 20
)

// ErrTooLarge is wrapped by the error of input beyond one of the limits.
var ErrTooLarge = errors.New("too large")

type limitError struct {
	limit int64
	unit  string
}

func (e *limitError) Error() string {
	return fmt.Sprintf("larger than the limit of %d %s", e.limit, e.unit)
}

func (e *limitError) Is(target error) bool { return target == ErrTooLarge }

func tooLarge(limit int64, unit string) error { return &limitError{limit, unit} }

// limited reads at most left bytes of r; one more is an error.
type limited struct {
	r    io.Reader
	left int64
	err  error
}

func limitBytes(r io.Reader, n int64) *limited {
	return &limited{r: r, left: n, err: tooLarge(n, "bytes")}
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, l.err
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if int64(n) > l.left {
		n, l.left = int(l.left), -1
		return n, l.err
	}
	l.left -= int64(n)
	return n, err
}

// rowBlocks collects up to MaxRows rows in blocks: a slice grown by append
// copies its rows some five times over and holds its old and new arrays at
// once (at MaxRows: 558 MB allocated, 230 to 290 MB heap at the peak).
type rowBlocks struct {
	blocks [][]shares.Row
	n      int
}

const blockRows = 4096 // 736 kB

// add appends r, or fails beyond MaxRows.
func (b *rowBlocks) add(r shares.Row) error {
	if b.n == MaxRows {
		return tooLarge(MaxRows, "rows")
	}
	if b.n%blockRows == 0 {
		// the first block grows as it fills: most listings are small
		b.blocks = append(b.blocks, make([]shares.Row, 0, min(blockRows, max(b.n, 16))))
	}
	last := &b.blocks[len(b.blocks)-1]
	*last = append(*last, r)
	b.n++
	return nil
}

// at is row i, which must have been added.
func (b *rowBlocks) at(i int) *shares.Row { return &b.blocks[i/blockRows][i%blockRows] }

// rows hands the rows over as one slice, dropping each block as it is
// copied.
func (b *rowBlocks) rows() []shares.Row {
	out := make([]shares.Row, 0, b.n)
	for i, blk := range b.blocks {
		out = append(out, blk...)
		b.blocks[i] = nil
	}
	b.blocks, b.n = nil, 0
	return out
}
