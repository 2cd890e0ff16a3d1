package drift

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/shares"
)

// passJob is a job of the simulated cluster: billing units on a user row
// from start to end (0: running).
type passJob struct {
	row        int
	start, end float64
	billing    float64
}

// simulatePhase is the usage of every row of out as slurmctld holds it at
// at when its passes fall at phase (fairshare.Passes, an independent
// model of _decay_thread), accounts holding their subtree's sum, and the
// billing rate of the jobs that ran in the last period and the finished
// jobs' tail sums (PassError.Running, TailRate, TailMost).
func simulatePhase(t *testing.T, out *shares.Table, jobs []passJob, p fairshare.Passes, at float64) (raw, running, tailRate, tailMost []float64) {
	t.Helper()
	assocs, err := out.Associations()
	if err != nil {
		t.Fatal(err)
	}
	n := len(assocs)
	raw, running, tailRate, tailMost = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for _, j := range jobs {
		raw[j.row] += p.JobUsage(j.start, j.end, at, j.billing)
		if j.start < at && (j.end == 0 || j.end > at-p.Period) {
			running[j.row] += j.billing
		}
		if j.end != 0 {
			w := j.billing * math.Pow(p.D(), at-j.end)
			tailRate[j.row] += w
			tailMost[j.row] += w * min(p.Period, j.end-j.start)
		}
	}
	for i := n - 1; i > 0; i-- {
		for _, s := range [][]float64{raw, running, tailRate, tailMost} {
			s[assocs[i].Parent] += s[i]
		}
	}
	return raw, running, tailRate, tailMost
}

// TestPassErrorExplainsPhase: a database rebuild at one decay-pass phase
// against slurmctld's usage at another, HL 1 h and a 1-minute period (the
// stress setting of the e2e suite), three wide jobs running early in the
// usage's life. The difference is all phase: PassError's bound holds it
// for every association, and drift judged against it flags nothing;
// judged without it (the phase taken as known) it flags, and a real fault
// (one user's RawUsage reset) is still flagged with it.
func TestPassErrorExplainsPhase(t *testing.T) {
	const period, at = 60.0, 1_800_000_000.0
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 20 {
		out := capture(t, "slurm-22.05/running-classic-1.txt")
		var users []int
		for i, row := range out.Rows {
			if row.User != "" && row.User != "root" {
				users = append(users, i)
			}
		}
		var jobs []passJob
		for _, u := range users {
			// history, ended before the window: its uncharged tail
			// depends on the phase
			jobs = append(jobs, passJob{u, at - 3600 - r.Float64()*1800, at - 600 - r.Float64()*600, float64(1 + r.IntN(64))})
			// short jobs, some charged nothing at all
			for range 3 {
				s := at - 900 + r.Float64()*800
				jobs = append(jobs, passJob{u, s, s + 5 + r.Float64()*50, float64(1 + r.IntN(16))})
			}
		}
		for k := range 3 {
			// wide jobs started a few minutes ago: their charge is a large
			// part of all usage
			jobs = append(jobs, passJob{users[(trial+k*5)%len(users)], at - 120 - r.Float64()*300, 0, float64(int(64) << k)})
		}
		ctld := fairshare.Passes{HalfLife: 3600, Period: period, Phase: math.Floor(r.Float64() * period)}
		db := ctld
		db.Phase = math.Floor(r.Float64() * period)
		repRaw, _, _, _ := simulatePhase(t, out, jobs, ctld, at)
		dbRaw, running, tailRate, tailMost := simulatePhase(t, out, jobs, db, at)
		for i := range out.Rows {
			out.Rows[i].RawUsage = math.Trunc(repRaw[i]) // as sshare prints it
		}
		assocs, err := out.Associations()
		if err != nil {
			t.Fatal(err)
		}
		for i := range assocs {
			assocs[i].RawUsage = dbRaw[i]
		}
		tree, err := fairshare.NewTree(assocs)
		if err != nil {
			t.Fatal(err)
		}
		pass := PassError{Window: period, Decay: ctld.D(), Running: running, Tails: []Tails{{Window: period, Rate: tailRate, Most: tailMost}}}
		parts := pass.Parts(tree)
		for i := range repRaw {
			if d := math.Abs(repRaw[i] - dbRaw[i]); d > parts[i].Total() {
				t.Fatalf("trial %d, %s/%s: usage %0.f apart at phases %v and %v, bound %.0f", trial, out.Rows[i].Account, out.Rows[i].User, d, ctld.Phase, db.Phase, parts[i].Total())
			}
		}
		judge := func(pass PassError) Summary {
			c, err := CompareReport(Input{Algorithm: fairshare.AlgorithmClassic, Dampening: 1, Tolerance: Tolerance{Formula: 1e-6, Usage: 0.005, Factor: 0.01},
				Report: out, DB: tree, TieOrderKnown: true, Pass: pass}, true)
			if err != nil {
				t.Fatal(err)
			}
			return c.Usage.Summary
		}
		if s := judge(pass); s.Beyond["raw_usage"]+s.Beyond["fairshare"] > 0 {
			t.Fatalf("trial %d (phases %v, %v): drift beyond the bound %v; largest %+v, bound %+v", trial, ctld.Phase, db.Phase, s.Beyond, s.MaxRelative, s.MaxRelativeBound)
		}
		if ctld.Phase != db.Phase {
			if s := judge(PassError{}); s.Beyond["raw_usage"] == 0 {
				t.Errorf("trial %d (phases %v, %v): no drift when the phase is taken as known: the test shows nothing", trial, ctld.Phase, db.Phase)
			}
		}
		// a reset user: far beyond what any phase explains
		u := users[0]
		out.Rows[u].RawUsage = 0
		if s := judge(pass); s.Beyond["raw_usage"] == 0 {
			t.Errorf("trial %d: %s/%s reset to 0 (was %.0f): not flagged", trial, out.Rows[u].Account, out.Rows[u].User, repRaw[u])
		}
	}
}

// ctldAcrossBoots is slurmctld's usage of each user row at at with
// AccountingStorageEnforce=limits, simulated pass by pass from an explicit
// list of pass moments (an independent model of _decay_thread across a
// restart: the new boot's passes keep their own phase): at each pass all
// usage decays by d^(seconds since the pass before), then each running
// job is charged Δ·d^Δ for the Δ seconds since that pass or its start; a
// job that ends between passes is charged so at its end.
func ctldAcrossBoots(n int, jobs []passJob, passes []float64, d, at float64) []float64 {
	raw := make([]float64, n)
	prev := passes[0]
	charge := func(j passJob, from, to float64) {
		if from = max(from, j.start); to > from {
			raw[j.row] += j.billing * (to - from) * math.Pow(d, to-from)
		}
	}
	for _, q := range passes[1:] {
		if q > at {
			break
		}
		for _, j := range jobs { // ends before this pass
			if j.end != 0 && j.end > prev && j.end <= q {
				charge(j, prev, j.end)
			}
		}
		for i := range raw {
			raw[i] *= math.Pow(d, q-prev)
		}
		for _, j := range jobs {
			if j.start < q && (j.end == 0 || j.end > q) {
				charge(j, prev, q)
			}
		}
		prev = q
	}
	for _, j := range jobs { // ended since the last pass
		if j.end != 0 && j.end > prev && j.end <= at {
			charge(j, prev, j.end)
		}
	}
	return raw
}

// TestPassErrorExplainsEarlierBoots: slurmctld restarted at a 10-minute
// half-life, its passes at :20 before and at :03 after; the rebuild takes
// today's phase for all of its usage (what is known: the state file, the
// boot). Usage charged before the restart weighs by the old passes, which
// nobody keeps: the part BootUsage gives it (the usage rebuilt at the boot,
// decayed) holds the difference for every association, drift judged
// against it flags nothing, without it some, and a 10% loss of the
// largest user is flagged all the same.
func TestPassErrorExplainsEarlierBoots(t *testing.T) {
	const period, boot = 60.0, 1_800_000_003.0
	at := boot + 5*period + 1
	out := capture(t, "slurm-22.05/running-classic-1.txt")
	var users []int
	for i, row := range out.Rows {
		if row.User != "" && row.User != "root" {
			users = append(users, i)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	var jobs []passJob
	for _, u := range users {
		s := boot - 1500 + r.Float64()*1200
		jobs = append(jobs, passJob{u, s, s + 60 + r.Float64()*400, float64(1 + r.IntN(256))})
	}
	jobs = append(jobs, passJob{users[0], boot - 200, 0, 128}) // across the restart
	var passes []float64
	for q := boot - 1800 + 17; q < boot; q += period { // the old boot's, at :20
		passes = append(passes, q)
	}
	for q := boot; q <= at; q += period { // the new one's from its start
		passes = append(passes, q)
	}
	db := fairshare.Passes{HalfLife: 600, Period: period, Phase: boot, ChargeJobEnd: true}
	repRaw := ctldAcrossBoots(len(out.Rows), jobs, passes, db.D(), at)
	dbRaw, running, _, _ := simulatePhase(t, out, jobs, db, at)
	// the two models agree where there is one phase
	var one []float64
	for q := boot - 1800; q <= at; q += period {
		one = append(one, q)
	}
	for i, v := range ctldAcrossBoots(len(out.Rows), jobs, one, db.D(), at) {
		if out.Rows[i].User != "" && math.Abs(v-dbRaw[i]) > 1e-6*max(1, v) {
			t.Fatalf("%s/%s: pass by pass %.6f, fairshare.Passes %.6f", out.Rows[i].Account, out.Rows[i].User, v, dbRaw[i])
		}
	}
	bootRaw, _, _, _ := simulatePhase(t, out, jobs, db, boot)
	assocs, err := out.Associations()
	if err != nil {
		t.Fatal(err)
	}
	for i := len(assocs) - 1; i > 0; i-- {
		repRaw[assocs[i].Parent] += repRaw[i]
	}
	for i := range out.Rows {
		out.Rows[i].RawUsage = math.Trunc(repRaw[i])
		assocs[i].RawUsage = dbRaw[i]
		bootRaw[i] *= math.Pow(db.D(), at-boot)
	}
	tree, err := fairshare.NewTree(assocs)
	if err != nil {
		t.Fatal(err)
	}
	judge := func(pass PassError) Summary {
		t.Helper()
		c, err := CompareReport(Input{Algorithm: fairshare.AlgorithmClassic, Dampening: 1, Tolerance: Tolerance{Formula: 1e-6, Usage: 0.005, Factor: 0.01},
			Report: out, DB: tree, TieOrderKnown: true, Pass: pass}, true)
		if err != nil {
			t.Fatal(err)
		}
		return c.Usage.Summary
	}
	known := PassError{Window: 1, Decay: db.D(), Running: running, Unrecorded: 1}
	if s := judge(known); s.Beyond["raw_usage"] == 0 {
		t.Fatalf("usage charged at another boot's passes is not flagged without its part: the test shows nothing")
	}
	pass := known
	pass.Period, pass.BootUsage = period, bootRaw
	parts := pass.Parts(tree)
	for i := range repRaw {
		if d := math.Abs(repRaw[i] - dbRaw[i]); d > parts[i].Total()+1 {
			t.Errorf("%s/%s: usage %.0f apart, bound %.0f (earlier boots %.0f)", out.Rows[i].Account, out.Rows[i].User, d, parts[i].Total(), parts[i].EarlierBoots)
		}
	}
	if s := judge(pass); s.Beyond["raw_usage"]+s.Beyond["fairshare"] > 0 {
		t.Errorf("drift beyond the bound with the earlier boots' part: %v; largest %+v, bound %+v", s.Beyond, s.MaxRelative, s.MaxRelativeBound)
	}
	u := users[0]
	for _, v := range users {
		if repRaw[v] > repRaw[u] {
			u = v
		}
	}
	out.Rows[u].RawUsage = math.Trunc(0.9 * repRaw[u])
	if s := judge(pass); s.Beyond["raw_usage"] == 0 {
		t.Errorf("%s/%s lost 10%% of %.0f: not flagged", out.Rows[u].Account, out.Rows[u].User, repRaw[u])
	}
}

// TestPassRawJobEnd: with AccountingStorageEnforce=limits slurmctld
// charges a finished job's last partial interval at its end, raising its
// chain's RawUsage, while the values computed at the last pass stay
// (real Fair Tree capture; the job end is simulated on it). Without the
// usage at the pass that is formula drift; with it (PassRaw) none, and
// NormShares normalized the other algorithm's way still drifts.
func TestPassRawJobEnd(t *testing.T) {
	out := capture(t, "slurm-22.05/idle-fairtree.txt")
	atPass := RawByKey(out)
	user := userWithUsage(out)
	// the job's end charges 40% of the user's usage to its chain
	charge := math.Round(0.4 * out.Rows[user].RawUsage)
	for _, i := range chargedRows(out, user) {
		out.Rows[i].RawUsage += charge
	}
	judge := func(passRaw map[result.AssocKey]float64) *Comparison {
		c, err := CompareReport(Input{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1, Tolerance: Tolerance{Formula: 1e-6}, Report: out, PassRaw: passRaw}, true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := judge(nil); c.Formula.OK() {
		t.Fatal("usage raised after the pass, values of the pass: no formula drift without PassRaw: the test shows nothing")
	}
	if c := judge(atPass); !c.Formula.OK() {
		t.Errorf("with the usage at the pass: %+v", c.Formula.Summary)
	}
	out.Rows[user].NormShares = 1 // a fault no lag gives
	if c := judge(atPass); c.Formula.OK() {
		t.Error("NormShares fault hidden by the pass allowance")
	}
}

// userWithUsage is the first user row with usage (root's own aside).
func userWithUsage(out *shares.Table) int {
	for i, r := range out.Rows {
		if r.User != "" && r.User != "root" && r.RawUsage > 0 {
			return i
		}
	}
	panic("no user with usage")
}

// chargedRows is row u and the account rows above it (sshare's indentation):
// the rows a job of u charges.
func chargedRows(out *shares.Table, u int) []int {
	rows := []int{u}
	depth := out.Rows[u].Depth
	for i := u - 1; i >= 0 && depth > 0; i-- {
		if r := &out.Rows[i]; r.User == "" && r.Depth < depth {
			rows = append(rows, i)
			depth = r.Depth
		}
	}
	return rows
}

// TestPassGap: the first report after a pass may already hold a job end
// charged between the pass and the read; the values of the pass then lie
// outside the replays on that report's and the current usage, by at most
// the running jobs' rate times the gap (Input.PassGap).
func TestPassGap(t *testing.T) {
	out := capture(t, "slurm-22.05/idle-fairtree.txt") // its values: those of the pass
	user := userWithUsage(out)
	charge := math.Round(0.4 * out.Rows[user].RawUsage)
	rows := chargedRows(out, user) // the same in every capture of one file
	read := capture(t, "slurm-22.05/idle-fairtree.txt")
	for _, i := range rows {
		read.Rows[i].RawUsage += charge / 2 // half charged before the read of PassRaw
		out.Rows[i].RawUsage += charge
	}
	passRaw := RawByKey(read)
	db, err := out.Tree()
	if err != nil {
		t.Fatal(err)
	}
	running := make([]float64, db.Len())
	for _, i := range rows {
		running[i] = charge / 10 // a job 10 s from its start to its end at most
	}
	judge := func(gap float64) *Comparison {
		c, err := CompareReport(Input{Algorithm: fairshare.AlgorithmFairTree, Dampening: 1, Tolerance: Tolerance{Formula: 1e-6, Usage: 0.005, Factor: 0.01},
			Report: out, PassRaw: passRaw, PassGap: gap, DB: db, TieOrderKnown: true, Pass: PassError{Running: running}}, true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if judge(0).Formula.OK() {
		t.Fatal("part of a job end charged before the read after the pass: no formula drift without the gap: the test shows nothing")
	}
	if c := judge(10); !c.Formula.OK() {
		t.Errorf("with the gap: %+v", c.Formula.Summary)
	}
}
