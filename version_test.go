package main

import (
	"testing"

	"github.com/prometheus/common/version"
)

// TestVersionFromCommonVersion: --version prints prometheus/common/version's
// Version, the variable the Makefile's -ldflags set and build_info reads.
func TestVersionFromCommonVersion(t *testing.T) {
	saved := version.Version
	t.Cleanup(func() { version.Version = saved })
	version.Version = "9.8.7-test"
	if code, out, _ := runCLI(t, "--version"); code != 0 || out != "slurmdbd_exporter 9.8.7-test\n" {
		t.Errorf("--version: exit %d, %q, want \"slurmdbd_exporter 9.8.7-test\\n\"", code, out)
	}
}
