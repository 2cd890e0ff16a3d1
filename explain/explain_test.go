package explain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
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

// TestExplainFairShareParent: a FairShare=parent association, stored as
// SLURMDB_FS_USE_PARENT (2147483647), reads "parent" in the table and
// fairshare_parent in the JSON, never as a share count; an ordinary
// association keeps its count.
func TestExplainFairShareParent(t *testing.T) {
	cl := result.Cluster{Name: "c", Algorithm: fairshare.AlgorithmFairTree, Assocs: []result.Association{
		{Account: "root", Shares: 1},
		{Account: "phys", Parent: "root", Shares: 40},
		{Account: "phys", User: "alice", Parent: "phys", Shares: fairshare.SharesParent},
	}}
	exps, err := User(cl, time.Unix(1_800_000_000, 0), "alice", "", result.Phase{})
	if err != nil || len(exps) != 1 || len(exps[0].Path) != 3 {
		t.Fatalf("User: %v, %+v", err, exps)
	}
	var table bytes.Buffer
	exps[0].WriteTable(&table)
	lines := strings.Split(table.String(), "\n")
	var alice, phys []string
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "alice":
			alice = f
		case len(f) > 1 && f[0] == "phys":
			phys = f
		}
	}
	if len(alice) < 2 || alice[1] != "parent" || len(phys) < 2 || phys[1] != "40" || strings.Contains(table.String(), "2147483647") {
		t.Errorf("shares column: alice %q, phys %q, want parent and 40:\n%s", alice, phys, table.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, exps); err != nil {
		t.Fatal(err)
	}
	var back []struct {
		Path []struct {
			Account, User   string
			FairShareParent *bool `json:"fairshare_parent"`
		} `json:"path"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != 1 || len(back[0].Path) != 3 {
		t.Fatalf("JSON: %v\n%s", err, js.String())
	}
	for i, want := range []bool{false, false, true} {
		if p := back[0].Path[i].FairShareParent; p == nil || *p != want {
			t.Errorf("path[%d] (%s %s) fairshare_parent %v, want %v", i, back[0].Path[i].Account, back[0].Path[i].User, p, want)
		}
	}
}
