package slurmharness

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fatalTB records Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestWaitForTriesOnce: a wait of no time still looks once, and fails with
// what it saw.
func TestWaitForTriesOnce(t *testing.T) {
	run := func(ok func() error) (calls int, msg string) {
		tb := &fatalTB{TB: t}
		c := &Cluster{t: tb}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.waitFor("it", 0, func() error { calls++; return ok() })
		}()
		<-done
		return calls, tb.msg
	}
	if calls, msg := run(func() error { return nil }); calls != 1 || msg != "" {
		t.Errorf("ok at once: %d calls, failed %q", calls, msg)
	}
	if calls, msg := run(func() error { return errors.New("not yet") }); calls != 1 || !strings.Contains(msg, "not yet") {
		t.Errorf("never ok: %d calls, failed %q: expected one call and its error", calls, msg)
	}
}
