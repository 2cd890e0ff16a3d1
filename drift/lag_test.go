package drift

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// capture parses a real sshare capture of ../testdata.
func capture(t *testing.T, name string) *shares.Table {
	t.Helper()
	out, err := sshare.ParseFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out.FillMissingFactor(1)
	return out
}

func classicReport(t *testing.T, out *shares.Table, prevRaw map[result.AssocKey]float64, inferLag bool) *Comparison {
	t.Helper()
	c, err := CompareReport(Input{Algorithm: fairshare.AlgorithmClassic, Dampening: 1, Tolerance: Tolerance{Formula: 1e-6},
		Report: out, PrevRaw: prevRaw, InferLag: inferLag}, true)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func row(t *testing.T, out *shares.Table, account, user string) *shares.Row {
	t.Helper()
	for i := range out.Rows {
		if r := &out.Rows[i]; r.Account == account && r.User == user {
			return r
		}
	}
	t.Fatalf("no row %s/%s", account, user)
	return nil
}

func entry(t *testing.T, rep *Report, account, user string) *Entry {
	t.Helper()
	for i := range rep.Associations {
		if e := &rep.Associations[i]; e.Account == account && e.User == user {
			return e
		}
	}
	t.Fatalf("no entry %s/%s", account, user)
	return nil
}

func rawUsage(out *shares.Table) map[result.AssocKey]float64 {
	raw := make(map[result.AssocKey]float64, len(out.Rows))
	for _, r := range out.Rows {
		raw[result.KeyOf(r.Account, r.User, r.Partition)] = r.RawUsage
	}
	return raw
}

var runningClassic = []string{
	"slurm-22.05/running-classic-1.txt", "slurm-22.05/running-classic-2.txt",
	"slurm-24.11/sshare-a-l-P-classic.txt", "slurm-25.11/sshare-a-l-P-classic.txt",
}

// TestInferLagRunningClassic: every real classic capture taken while jobs
// ran drifts from the plain replay, and is what slurmctld shows one pass
// behind with the accounts' NormUsage as the usage at the pass's start:
// lag_not_excluded, no drift. TRESRunMins is 0 in all of them (slurmctld
// keeps it only with AccountingStorageEnforce=limits): the accounts'
// NormUsage shows the charge.
func TestInferLagRunningClassic(t *testing.T) {
	for _, name := range runningClassic {
		t.Run(name, func(t *testing.T) {
			plain := classicReport(t, capture(t, name), nil, false)
			if plain.Formula.Summary.Counts[StatusDrift] == 0 || plain.Lag != "" {
				t.Fatalf("plain replay: %v, lag %q: want drift (the capture shows the lag)", plain.Formula.Summary.Counts, plain.Lag)
			}
			c := classicReport(t, capture(t, name), nil, true)
			s := c.Formula.Summary
			if !c.Formula.OK() || s.Counts[StatusLagNotExcluded] != plain.Formula.Summary.Counts[StatusDrift] {
				t.Errorf("counts %v, want the plain replay's %d drifting entries lag_not_excluded", s.Counts, plain.Formula.Summary.Counts[StatusDrift])
			}
			for k, n := range s.Beyond {
				if n != 0 {
					t.Errorf("beyond %s: %d, want 0", k, n)
				}
			}
			if !strings.Contains(c.Lag, "NormUsage") || strings.Contains(c.Lag, "TRESRunMins") {
				t.Errorf("lag %q: want the accounts' NormUsage as evidence", c.Lag)
			}
			for _, e := range c.Formula.Associations {
				if (e.Status == StatusLagNotExcluded) != (e.Lag != nil) {
					t.Errorf("%s/%s: status %s, lag %v", e.Account, e.User, e.Status, e.Lag)
				}
				if e.Lag == nil {
					continue
				}
				for k, d := range fields(e.Lag.Drift) {
					if a := fields(e.Lag.Allowed)[k]; !math.IsNaN(float64(d)) && math.Abs(float64(d)) > float64(a) {
						t.Errorf("%s/%s: %s lag drift %v beyond %v", e.Account, e.User, Fields[k], d, a)
					}
				}
			}
			var b strings.Builder
			if err := c.Formula.WriteTable(&b); err != nil || !strings.Contains(b.String(), "lag not excluded") {
				t.Errorf("table says no lag: %v\n%s", err, b.String())
			}
		})
	}
}

func fields(v *Values) []Num {
	return []Num{v.NormShares, v.RawUsage, v.NormUsage, v.EffectiveUsage, v.FairShare, v.LevelFS}
}

// TestInferLagIdle: an idle capture (every job ended, a pass since) shows
// no charge: judged exactly as without the lag, faults included.
func TestInferLagIdle(t *testing.T) {
	for _, fault := range []bool{false, true} {
		out := func() *shares.Table {
			o := capture(t, "slurm-22.05/idle-classic.txt")
			if fault {
				row(t, o, "exp", "dave").FairShare += 0.001
			}
			return o
		}
		plain, c := classicReport(t, out(), nil, false), classicReport(t, out(), nil, true)
		a, _ := json.Marshal(plain.Formula)
		b, _ := json.Marshal(c.Formula)
		if c.Lag != "" || string(a) != string(b) {
			t.Errorf("fault %v: lag %q; with it\n%s\nwithout\n%s", fault, c.Lag, b, a)
		}
		if c.Formula.OK() == fault {
			t.Errorf("fault %v: ok %v", fault, c.Formula.OK())
		}
	}
}

// TestInferLagTRESRunMins: running jobs (TRESRunMins, kept with
// AccountingStorageEnforce=limits) are named as evidence too; with no
// charge in the accounts' NormUsage nothing moves.
func TestInferLagTRESRunMins(t *testing.T) {
	out := capture(t, "slurm-22.05/idle-classic.txt")
	row(t, out, "theory", "alice").TRESRunMins = "cpu=120,mem=0,energy=0,node=2,billing=120"
	c := classicReport(t, out, nil, true)
	if !strings.Contains(c.Lag, "TRESRunMins of theory/alice") || !c.Formula.OK() || c.Formula.Summary.Counts[StatusOK] != 26 {
		t.Errorf("lag %q, counts %v", c.Lag, c.Formula.Summary.Counts)
	}
	for _, s := range []string{"", "cpu=0,mem=0,energy=0", "cpu=0"} {
		if running(s) {
			t.Errorf("running(%q)", s)
		}
	}
}

// TestInferLagKeepsFaults: on a lone running snapshot the lag allowance
// hides no value that the one-pass lag does not give. ivan's FairShare set
// between the replay's and the one a pass behind (where an allowance of
// "anywhere between the two" would take it), and ivan's NormShares set as
// Fair Tree normalizes it (a reconfigure without restart): both drift,
// while the rest stays lag_not_excluded.
func TestInferLagKeepsFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(r *shares.Row)
		value string
	}{
		{"fairshare", func(r *shares.Row) { r.FairShare = 0.428 }, "fairshare"},
		{"norm_shares", func(r *shares.Row) { r.NormShares = 1 }, "norm_shares"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := capture(t, "slurm-22.05/running-classic-1.txt")
			tc.edit(row(t, out, "inorg", "ivan"))
			c := classicReport(t, out, nil, true)
			e := entry(t, c.Formula, "inorg", "ivan")
			if e.Status != StatusDrift || c.Formula.OK() {
				t.Fatalf("ivan %s (drift %s), report ok %v: want drift", e.Status, e.Drift.String(), c.Formula.OK())
			}
			if c.Formula.Summary.Counts[StatusDrift] != 1 || c.Formula.Summary.Beyond[tc.value] != 1 || c.Formula.Summary.Counts[StatusLagNotExcluded] != 17 {
				t.Errorf("summary %+v: want ivan alone drifting, on %s", c.Formula.Summary, tc.value)
			}
			if tc.value == "fairshare" {
				// the fault lies within the replay's distance to the lag
				lagged := entry(t, classicReport(t, capture(t, "slurm-22.05/running-classic-1.txt"), nil, true).Formula, "inorg", "ivan").Lag.Computed.FairShare
				if replay := e.Computed.FairShare; !(math.Abs(0.428-float64(replay)) < math.Abs(float64(lagged-replay))) {
					t.Errorf("replay %v, lagged %v: the fault is not between them", replay, lagged)
				}
			}
		})
	}
}

// TestPrevRawRealPasses: running-classic-2 against running-classic-1, the
// report before slurmctld's pass (serve's PrevRaw, check's series): no
// drift; a FairShare no lag gives still drifts.
func TestPrevRawRealPasses(t *testing.T) {
	prev := rawUsage(capture(t, "slurm-22.05/running-classic-1.txt"))
	c := classicReport(t, capture(t, "slurm-22.05/running-classic-2.txt"), prev, true)
	if !c.Formula.OK() || c.Formula.Summary.Counts[StatusOK] != 26 || c.Lag != "" {
		t.Errorf("counts %v, lag %q: want 26 ok, the lag modelled from the earlier report", c.Formula.Summary.Counts, c.Lag)
	}
	out := capture(t, "slurm-22.05/running-classic-2.txt")
	row(t, out, "org", "gina").FairShare = 0.35
	c = classicReport(t, out, prev, true)
	if e := entry(t, c.Formula, "org", "gina"); e.Status != StatusDrift || c.Formula.Summary.Counts[StatusDrift] != 1 {
		t.Errorf("gina %s, counts %v: want gina alone drifting", e.Status, c.Formula.Summary.Counts)
	}
}

// TestNotYetComputedNote: a row slurmctld has not computed since it was
// added (blank NormUsage, EffectvUsage and FairShare 0, as 22.05 prints
// it) is listed as such and its factor is not compared.
func TestNotYetComputedNote(t *testing.T) {
	out := capture(t, "slurm-22.05/idle-classic.txt")
	i := len(out.Rows)
	for j, r := range out.Rows {
		if r.Account == "idle2" && r.User == "tu2" {
			i = j + 1
		}
	}
	added := out.Rows[i-1]
	added.User, added.RawShares, added.NormShares, added.RawUsage = "newu", 0, 0, 0
	added.NormUsage, added.EffectvUsage, added.FairShare = math.NaN(), 0, 0
	out.Rows = append(out.Rows[:i], append([]shares.Row{added}, out.Rows[i:]...)...)
	c := classicReport(t, out, nil, true)
	e := entry(t, c.Formula, "idle2", "newu")
	if e.Status != StatusOK || len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "not yet computed by slurmctld") || c.Formula.Summary.NotYetComputed != 1 {
		t.Errorf("entry %s %q, summary %+v", e.Status, e.Notes, c.Formula.Summary)
	}
	var b strings.Builder
	if err := c.Formula.WriteTable(&b); err != nil || !strings.Contains(b.String(), "not yet computed by slurmctld 1") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}

// TestAddedSinceThePass: right after associations are added
// (sacctmgr add user), slurmctld prints its siblings' NormShares anew but
// the other values of its last pass, computed on the tree before them;
// the formula drift that makes is measured, not judged, until its next
// pass. The same report with the new row computed is judged, and drifts.
// Fair Tree: a newcomer with no usage outranks everyone at its level, so
// every user's rank moves (on this synthetic tree classic's values move
// within the tolerance).
func TestAddedSinceThePass(t *testing.T) {
	for _, alg := range []fairshare.Algorithm{fairshare.AlgorithmFairTree} {
		before := fairshare.Synthetic(60, 3, 7)
		var assocs []fairshare.Association
		for i := range before.Len() {
			assocs = append(assocs, before.Association(i))
		}
		// a user with many shares beside the first user of some account
		at := slices.IndexFunc(assocs, func(a fairshare.Association) bool { return a.IsUser() })
		assocs = append(assocs, fairshare.Association{Account: assocs[at].Account, User: "newcomer", Parent: assocs[at].Parent, Shares: 40})
		after, err := fairshare.NewTree(assocs)
		if err != nil {
			t.Fatal(err)
		}
		old, err := before.Compute(alg, 1)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := after.Compute(alg, 1)
		if err != nil {
			t.Fatal(err)
		}
		// the values of the last pass, NormShares anew, the new row blank
		out := shares.Of(after, fresh)
		byKey := map[result.AssocKey]fairshare.Values{}
		for i := range before.Len() {
			a := before.Association(i)
			byKey[result.KeyOf(a.Account, a.User, a.Partition)] = old[i]
		}
		for i := range out.Rows {
			r := &out.Rows[i]
			v, ok := byKey[result.KeyOf(r.Account, r.User, r.Partition)]
			if !ok {
				r.NormUsage, r.EffectvUsage, r.FairShare, r.LevelFS = math.NaN(), 0, 0, 0
				continue
			}
			r.NormUsage, r.EffectvUsage, r.FairShare = math.Round(v.NormUsage*1e6)/1e6, math.Round(v.EffectiveUsage*1e6)/1e6, math.Round(v.FairShare*1e6)/1e6
			if alg == fairshare.AlgorithmFairTree {
				r.LevelFS = math.Round(v.LevelFS*1e6) / 1e6
			}
		}
		judge := func(out *shares.Table) *Comparison {
			c, err := CompareReport(Input{Algorithm: alg, Dampening: 1, Tolerance: Tolerance{Formula: 1e-4}, Report: out}, true)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		c := judge(out)
		noted := 0
		for _, e := range c.Formula.Associations {
			if slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, "not judged: associations were added") }) {
				noted++
			}
		}
		if n := c.Formula.Summary.Counts[StatusDrift]; n != 0 || noted == 0 {
			t.Errorf("%s: %d drifting, %d noted as not judged: want none drifting, the drift noted", alg, n, noted)
		}
		for _, d := range c.Drift {
			if d.Beyond != 0 || !math.IsInf(d.Bound, 1) {
				t.Errorf("%s: %s %s: %d beyond, bound %v: want measured, not judged", alg, d.Kind, d.Value, d.Beyond, d.Bound)
			}
		}
		// the new row computed (its NormUsage 0): judged, and the old
		// values drift
		for i := range out.Rows {
			if math.IsNaN(out.Rows[i].NormUsage) {
				out.Rows[i].NormUsage = 0
			}
		}
		if c := judge(out); c.Formula.Summary.Counts[StatusDrift] == 0 {
			t.Errorf("%s: the values of the tree before the addition, judged: no drift", alg)
		}
		t.Logf("%s: %d entries' drift not judged", alg, noted)
	}
}
