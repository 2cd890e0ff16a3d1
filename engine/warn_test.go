package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/usage"
)

// TestWarnChanged: a data problem is logged when it appears, not again at
// every refresh while it stays; one that goes and comes back is logged
// again.
func TestWarnChanged(t *testing.T) {
	var logs bytes.Buffer
	e := New(&slurmconf.Config{}, "", WithLogger(zerolog.New(&logs)))
	bad := func(msgs ...string) []problem {
		var ps []problem
		for _, m := range msgs {
			ps = append(ps, problemOf(errors.New(m)))
		}
		return ps
	}
	for _, round := range [][]problem{bad("bad row 1", "bad row 2"), bad("bad row 1", "bad row 2"), bad("bad row 2"), bad("bad row 1", "bad row 2")} {
		e.warnChanged("c", round)
	}
	if n1, n2 := strings.Count(logs.String(), "bad row 1"), strings.Count(logs.String(), "bad row 2"); n1 != 2 || n2 != 1 {
		t.Errorf("bad row 1 logged %d times (want 2: it went away and came back), bad row 2 %d times (want 1):\n%s", n1, n2, logs.String())
	}
	// a problem whose message carries a decaying value is one problem,
	// warned once, not at every refresh as the value moves
	logs.Reset()
	for _, v := range []float64{-120, -118.5, -117} {
		e.warnChanged("c", []problem{problemOf(&usage.Problem{Identity: "negative usage of bob", Err: fmt.Errorf("usage of bob is %g", v)})})
	}
	if n := strings.Count(logs.String(), "usage of bob"); n != 1 {
		t.Errorf("a problem whose value moved logged %d times, want once:\n%s", n, logs.String())
	}
}
