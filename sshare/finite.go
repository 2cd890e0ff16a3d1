package sshare

import (
	"bytes"
	"io"
	"strings"
)

// finiteState makes the JSON of data_parser v0.0.40/41 valid: they write
// non-finite doubles as the bare tokens Infinity, -Infinity and NaN.
// Outside strings, Infinity becomes 1e999999, which bareNumber reads as
// +Inf, and NaN becomes null.
type finiteState struct{ inString, escaped bool }

// transform appends src to dst with the tokens replaced, and returns how
// much of src it used: all of it unless, before the end of the input
// (final), src ends with what may be the start of a token.
func (s *finiteState) transform(dst, src []byte, final bool) ([]byte, int) {
	last := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case s.inString:
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
		case c == '"':
			s.inString = true
		case c == 'I' || c == 'N':
			word, repl := "Infinity", "1e999999"
			if c == 'N' {
				word, repl = "NaN", "null"
			}
			switch rest := src[i:]; {
			case bytes.HasPrefix(rest, []byte(word)):
				dst = append(append(dst, src[last:i]...), repl...)
				i += len(word) - 1
				last = i + 1
			case !final && len(rest) < len(word) && strings.HasPrefix(word, string(rest)):
				return append(dst, src[last:i]...), i
			}
		}
	}
	return append(dst, src[last:]...), len(src)
}

// finite is finiteState over a whole document.
func finite(b []byte) []byte {
	var s finiteState
	out, _ := s.transform(nil, b, true)
	return out
}

// finiteReader is finiteState over a stream.
type finiteReader struct {
	finiteState
	r         io.Reader
	buf       [8 << 10]byte
	held      int    // bytes at the start of buf left for the next read
	out, next []byte // transformed, not yet returned; next is out's storage
	err       error
}

func (f *finiteReader) Read(p []byte) (int, error) {
	for len(f.out) == 0 && f.err == nil {
		n, err := f.r.Read(f.buf[f.held:])
		f.err = err
		src := f.buf[:f.held+n]
		var used int
		f.next, used = f.transform(f.next[:0], src, err != nil)
		f.out, f.held = f.next, copy(f.buf[:], src[used:])
	}
	if len(f.out) == 0 {
		return 0, f.err
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}
