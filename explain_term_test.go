package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
)

// TestExplainTableEscapesNames: names come from the database and Slurm;
// an escape sequence, a carriage return or a newline in one is printed
// as a Go escape, never sent to the terminal as it is.
func TestExplainTableEscapesNames(t *testing.T) {
	nan := drift.Num(0)
	x := Explanation{ClusterAt: ClusterAt{Cluster: "c\x1b]0;owned\x07"}, Path: []Level{
		{AssocName: AssocName{Account: "root"}},
		{AssocName: AssocName{Account: "phys\x1b[2J", User: "al\rice\n", Partition: "p\x9b1m"}, NormUsage: nan},
	}, Reason: "held down by phys\x1b[2J"}
	var b bytes.Buffer
	x.writeTable(&b)
	out := b.String()
	for _, bad := range []string{"\x1b", "\r", "\x07", "\x9b", "\u009b"} {
		if strings.Contains(out, bad) {
			t.Errorf("output holds %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{`phys\x1b[2J`, `al\rice\n`, `c\x1b]0;owned\a`} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not show %s:\n%s", want, out)
		}
	}
	if got := term("ünïcode"); got != "ünïcode" {
		t.Errorf("term(ünïcode) = %q: printable names stay as they are", got)
	}
}

// TestServerTimeouts: a client cannot hold a connection for ever, idle or
// sending its headers slowly.
func TestServerTimeouts(t *testing.T) {
	s := newServer(http.NewServeMux())
	if s.IdleTimeout <= 0 || s.IdleTimeout > 10*time.Minute || s.ReadHeaderTimeout <= 0 {
		t.Errorf("IdleTimeout %v, ReadHeaderTimeout %v: expected both set", s.IdleTimeout, s.ReadHeaderTimeout)
	}
}
