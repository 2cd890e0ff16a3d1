// Package sealed frames the files serve keeps across its restarts
// (--storage.path) so that what is read back is what was written: a file
// that still parses is not necessarily the one saved (an edit, a torn
// copy, another version's layout). A sealed file is a magic line, the
// format (uint32), the body's length (uint64) and the body's SHA-256, then
// the body. Big-endian.
package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Kind names one kind of sealed file: its magic line (ending in '\n'),
// its format, which changes when the body's layout or meaning does, and
// what it is called in errors.
type Kind struct {
	Magic  string
	Format uint32
	What   string
}

// ErrUnsealed is wrapped by Open's error when the file does not start
// with the kind's magic line: written before the kind was sealed, or not
// one at all.
var ErrUnsealed = errors.New("no header")

// HeaderSize is how many bytes Seal writes before the body.
func (k Kind) HeaderSize() int { return len(k.Magic) + 4 + 8 + sha256.Size }

// Seal writes body to w with k's header.
func (k Kind) Seal(w io.Writer, body []byte) error {
	sum := sha256.Sum256(body)
	h := binary.BigEndian.AppendUint32([]byte(k.Magic), k.Format)
	h = binary.BigEndian.AppendUint64(h, uint64(len(body)))
	if _, err := w.Write(append(h, sum[:]...)); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// Open checks the header of what rd holds and gives the body it vouches
// for, reading at most limit bytes, header included.
func (k Kind) Open(rd io.Reader, limit int64) ([]byte, error) {
	hs := k.HeaderSize()
	h := make([]byte, hs)
	n, err := io.ReadFull(rd, h)
	if !bytes.HasPrefix(h[:n], []byte(k.Magic)) {
		return nil, fmt.Errorf("not a %s: expected one starting with %q (format %d): %w", k.What, k.Magic, k.Format, ErrUnsealed)
	}
	if err != nil {
		return nil, fmt.Errorf("%s truncated: %d bytes, expected a header of %d", k.What, n, hs)
	}
	if f := binary.BigEndian.Uint32(h[len(k.Magic):]); f != k.Format {
		return nil, fmt.Errorf("%s of format %d: expected format %d", k.What, f, k.Format)
	}
	size := binary.BigEndian.Uint64(h[len(k.Magic)+4:])
	if size > uint64(limit-int64(hs)) {
		return nil, fmt.Errorf("%s of %d bytes: expected at most %d", k.What, size, limit-int64(hs))
	}
	body, err := io.ReadAll(io.LimitReader(rd, int64(size)+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", k.What, err)
	case uint64(len(body)) < size:
		return nil, fmt.Errorf("%s truncated: %d bytes after the header, expected %d", k.What, len(body), size)
	case uint64(len(body)) > size:
		return nil, fmt.Errorf("%s followed by more bytes: expected %d after the header", k.What, size)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], h[hs-sha256.Size:]) {
		return nil, fmt.Errorf("%s changed since it was written: SHA-256 %x, expected %x", k.What, sum, h[hs-sha256.Size:])
	}
	return body, nil
}
