// Package regular reads the files an operator points the exporter at (its
// configuration, the DSN, the saved usage) only if they are regular files
// of a bounded size: a FIFO would hang the reader waiting for a writer, a
// device may do anything when opened or read, and neither has a size to
// check first.
package regular

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular and ErrTooLarge are wrapped by Read's errors.
var (
	ErrNotRegular = errors.New("expected a regular file")
	ErrTooLarge   = errors.New("too large")
)

// Read reads the file at path if it is a regular one of at most limit
// bytes, and gives its mode (the DSN file's is checked). A symlink is
// followed: what is checked is what it points to, before it is opened,
// then the descriptor opened (against a swap in between, which O_NONBLOCK
// keeps from blocking), so a link cannot bring in what a file cannot. What
// bounds the time is what bounds the size.
func Read(path string, limit int64) ([]byte, fs.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is %s: %w", path, kind(fi.Mode()), ErrNotRegular)
	}
	if fi.Size() > limit {
		return nil, 0, fmt.Errorf("%s has %d bytes: expected at most %d: %w", path, fi.Size(), limit, ErrTooLarge)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil {
		return nil, 0, err
	} else if !os.SameFile(fi, opened) {
		return nil, 0, fmt.Errorf("%s replaced while being opened", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s grew past %d bytes while being read: %w", path, limit, ErrTooLarge)
	}
	return b, fi.Mode(), err
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
