package explain

import (
	"bytes"
	"strings"
	"testing"

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
	x.WriteTable(&b)
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
