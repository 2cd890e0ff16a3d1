package sshare

import (
	"math"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// TestParseJSONNonFinite: the bare tokens of v0.0.40/41 outside strings,
// the same text inside strings untouched, escapes included.
func TestParseJSONNonFinite(t *testing.T) {
	in := doc(`{"cluster":"c","name":"root","parent":"","shares":{"set":false,"infinite":false,"number":0},"usage":10,"effective_usage":1.0,"fairshare":{"factor":0.0,"level":4294967294.0},"type":["ASSOCIATION"]}`,
		`{"cluster":"c","name":"Inf\"Infinity NaN\\","parent":"root","shares":{"set":true,"infinite":false,"number":1},"usage":0,"effective_usage":NaN,"fairshare":{"factor":1.0,"level":Infinity},"type":["ASSOCIATION"]}`,
		`{"cluster":"c","name":"-Infinity","parent":"Inf\"Infinity NaN\\","shares":{"set":true,"infinite":false,"number":2147483647},"usage":0,"effective_usage":0.0,"fairshare":{"factor":1.0,"level":-Infinity},"type":["USER"]}`,
		`{"cluster":"c","name":"u","parent":"Inf\"Infinity NaN\\","shares":{"set":true,"infinite":false,"number":1},"usage":5,"effective_usage":0.5,"fairshare":{"factor":0.5,"level":1.8446744073709552e+19},"type":["USER"]}`)
	out, err := ParseJSON(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	acct, pu, u := out.Rows[1], out.Rows[2], out.Rows[3]
	if acct.Account != `Inf"Infinity NaN\` || !math.IsNaN(acct.EffectvUsage) || !math.IsInf(acct.LevelFS, 1) || !math.IsNaN(out.Rows[0].LevelFS) {
		t.Errorf("account %+v, root %+v", acct, out.Rows[0])
	}
	if pu.User != "-Infinity" || pu.Account != acct.Account || pu.Depth != 2 || !math.IsInf(pu.LevelFS, -1) || pu.RawShares != fairshare.SharesParent {
		t.Errorf("user %+v", pu)
	}
	if !math.IsInf(u.LevelFS, 1) || u.FairShare != 0.5 || u.RawUsage != 5 {
		t.Errorf("user %+v", u)
	}
	if !out.Has(shares.LevelFS) || out.FactorMissing {
		t.Errorf("columns %v, FactorMissing %v: want Fair Tree", out.Columns, out.FactorMissing)
	}

	// The real bare Infinity: 24.11 v0.0.40, root's user row and u12.
	v40 := parseJSONFile(t, "../testdata/slurm-24.11/shares-v0.0.40.json")
	for _, i := range []int{1, 5} {
		if !math.IsInf(v40.Rows[i].LevelFS, 1) {
			t.Errorf("24.11 v0.0.40 row %d: %+v", i+1, v40.Rows[i])
		}
	}
}
