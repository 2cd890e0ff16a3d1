package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes text to name in dir (a test's t.TempDir()) and returns
// its path.
func WriteFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
