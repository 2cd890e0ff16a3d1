package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestDSNFile: a DSN file others can read is warned about (it holds the
// database password); a second line is an error that quotes neither
// line (the driver joined them into one DSN).
func TestDSNFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		warn          bool
		err           string
	}{
		{"private", "u:secret@tcp(h:3306)/db\n", 0o600, false, ""},
		{"group-readable", "u:secret@tcp(h:3306)/db\n", 0o640, false, ""},
		{"world-readable", "u:secret@tcp(h:3306)/db\n", 0o644, true, ""},
		{"two lines", "u:secret@tcp(h:3306)/\ndb\n", 0o600, false, "more than one line"},
		{"CRLF", "u:secret@tcp(h:3306)/db\r\n", 0o600, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			os.WriteFile(path, []byte(tc.content), tc.mode)
			os.Chmod(path, tc.mode)
			var logs bytes.Buffer
			d := DBFlags{DSNFile: path, DBTimeout: time.Second}
			dsn, err := d.dsn(zerolog.New(&logs))
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v: want %q", err, tc.err)
			case tc.err == "" && (err != nil || dsn != "u:secret@tcp(h:3306)/db"):
				t.Errorf("dsn %q, %v", dsn, err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error quotes the password: %v", err)
			}
			if warned := strings.Contains(logs.String(), "readable by every user"); warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
}
