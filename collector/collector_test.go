package collector_test

import (
	"flag"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
	. "github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

func demoCollector(t *testing.T) *Collector {
	t.Helper()
	c := New()
	c.Extended = true
	if err := c.Publish(buildtest.Demo(time.Now(), cli.DemoAssociations)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLint: the exposition passes client_golang's metric lint and a
// pedantic registry (every sent metric described, consistent labels).
func TestLint(t *testing.T) {
	c := demoCollector(t)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"slurmdbd_fairshare_factor", "slurmdbd_fairshare_drift_max", "slurmdbd_exporter_up", "slurmdbd_fairshare_level_fs"} {
		if !names[want] {
			t.Errorf("no %s in the demo exposition", want)
		}
	}
}

// TestNothingPublished: before the first refresh a scrape is empty.
func TestNothingPublished(t *testing.T) {
	if n := testutil.CollectAndCount(New()); n != 0 {
		t.Errorf("%d metrics before any refresh", n)
	}
}

// TestMetricsDoc: docs/metrics.md is generated from the descriptors.
func TestMetricsDoc(t *testing.T) {
	want := MetricsDoc()
	const path = "../docs/metrics.md"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/metrics.md is stale: go test ./collector -run TestMetricsDoc -update")
	}
	if len(Metrics) != len(Descs) {
		t.Errorf("%d metrics documented, %d described", len(Metrics), len(Descs))
	}
	for _, m := range Metrics {
		if !strings.Contains(want, "`"+m.Name+"`") {
			t.Errorf("%s missing from the doc", m.Name)
		}
	}
}

// TestAwkwardNames: names as a database or sshare may hold them (quotes,
// '|', a newline, unicode, 1 KB, bytes that are not UTF-8) publish, and
// read back through the text format as the same strings (invalid bytes as
// U+FFFD).
func TestAwkwardNames(t *testing.T) {
	snap := buildtest.Demo(time.Now(), cli.DemoAssociations)
	names := []string{`qu"ote's`, "pi|pe", "new\nline", "back\\slash", "ünïcødé-名前", strings.Repeat("k", 1024), "bad\xffbyte"}
	cl := &snap.Clusters[0]
	for i, n := range names {
		cl.Assocs[i+1].User = n
	}
	_, text := publishedText(t, snap, false)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for _, m := range mfs["slurmdbd_fairshare_shares"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "user" {
				users[l.GetValue()] = true
			}
		}
	}
	for _, n := range names {
		if want := strings.ToValidUTF8(n, "\uFFFD"); !users[want] {
			t.Errorf("user %q not read back from the exposition", want)
		}
	}
}

// TestRenderMatchesClientGolang: the exposition Publish and a scrape
// render by hand holds the same lines as client_golang's own text encoding
// of the same snapshot at the same moment (families and series sorted
// differently), awkward names included.
func TestRenderMatchesClientGolang(t *testing.T) {
	snap := buildtest.Demo(time.Now(), 300)
	for i, n := range []string{`qu"ote's`, "new\nline", "back\\slash", "ünïcødé", "bad\xff\xfebytes"} {
		snap.Clusters[0].Assocs[i+1].User = n
	}
	c, text := publishedText(t, snap, true)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(s string) []string {
		l := strings.Split(strings.TrimSpace(s), "\n")
		slices.Sort(l)
		return l
	}
	got, exp := lines(text), lines(want.String())
	if len(got) != len(exp) {
		t.Fatalf("%d lines rendered, client_golang renders %d", len(got), len(exp))
	}
	for i := range got {
		if got[i] != exp[i] {
			t.Fatalf("line %d: rendered\n  %s\nclient_golang\n  %s", i, got[i], exp[i])
		}
	}
	if len(got) < 5000 {
		t.Errorf("only %d lines: the demo should fill every family", len(got))
	}
}

// TestSeriesBudget: by default an association carries at most 8 series
// (100k associations stay under a million), under either algorithm;
// --collector.extended adds the rest.
func TestSeriesBudget(t *testing.T) {
	for _, alg := range []fairshare.Algorithm{fairshare.AlgorithmFairTree, fairshare.AlgorithmClassic} {
		count := func(extended bool) (perAssoc float64, families int) {
			snap := buildtest.Demo(time.Now(), 2000)
			snap.Clusters[0].Algorithm = alg
			_, text := publishedText(t, snap, extended)
			n := 0
			for _, l := range strings.Split(text, "\n") {
				if strings.Contains(l, `,user="`) {
					n++
				}
			}
			fam := strings.Count(text, "# TYPE ")
			return float64(n) / float64(len(snap.Clusters[0].Assocs)), fam
		}
		def, defFam := count(false)
		ext, extFam := count(true)
		t.Logf("%s: %.2f series per association by default (%d families), %.2f extended (%d families)", alg, def, defFam, ext, extFam)
		if def > 8 || def < 5 {
			t.Errorf("%s: %.2f series per association by default, want 5 to 8", alg, def)
		}
		if ext < def+8 || extFam <= defFam {
			t.Errorf("%s: extended %.2f series per association in %d families, default %.2f in %d", alg, ext, extFam, def, defFam)
		}
	}
}

// TestSubtreeRanks: by default under Fair Tree every account row carries
// the block of ranks of the users under it (root: 1 to the number of
// users), each user's rank lies in its account's block, and each block in
// its parent's; under classic there are none.
func TestSubtreeRanks(t *testing.T) {
	snap := buildtest.Demo(time.Now(), 400)
	cl := &snap.Clusters[0]
	_, text := publishedText(t, snap, false)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ account, user, partition string }
	values := func(name string) (map[key]float64, map[key]string) {
		v, parent := map[key]float64{}, map[key]string{}
		for _, m := range mfs[name].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			k := key{l["account"], l["user"], l["partition"]}
			v[k], parent[k] = m.GetGauge().GetValue(), l["parent"]
		}
		return v, parent
	}
	hi, parents := values("slurmdbd_fairshare_subtree_rank_max")
	lo, _ := values("slurmdbd_fairshare_subtree_rank_min")
	rank, userParent := values("slurmdbd_fairshare_rank")
	// the accounts with users under them, walking up from each user
	parentOf := map[string]string{}
	for _, a := range cl.Assocs {
		if a.User == "" {
			parentOf[a.Account] = a.Parent
		}
	}
	users, withUsers := 0, map[string]bool{}
	for _, a := range cl.Assocs {
		if a.User != "" {
			users++
			for p := a.Parent; p != ""; p = parentOf[p] {
				withUsers[p] = true
			}
		}
	}
	if len(hi) != len(withUsers) || len(lo) != len(withUsers) || len(withUsers) < 10 {
		t.Fatalf("%d and %d account rows with subtree ranks, %d accounts with users under them", len(hi), len(lo), len(withUsers))
	}
	root := key{account: "root"}
	if hi[root] != float64(users) || lo[root] != 1 {
		t.Errorf("root's block %v..%v, want 1..%d", lo[root], hi[root], users)
	}
	for k, r := range rank {
		a := key{account: userParent[k]}
		if r < lo[a] || r > hi[a] {
			t.Errorf("%v: rank %v outside its account's block %v..%v", k, r, lo[a], hi[a])
		}
	}
	for k, p := range parents {
		if p == "" {
			continue
		}
		a := key{account: p}
		if lo[k] > hi[k] || lo[k] < lo[a] || hi[k] > hi[a] {
			t.Errorf("%s: block %v..%v, not inside its parent %s's %v..%v", k.account, lo[k], hi[k], p, lo[a], hi[a])
		}
	}
	snap = buildtest.Demo(time.Now(), 400)
	snap.Clusters[0].Algorithm = fairshare.AlgorithmClassic
	if _, text := publishedText(t, snap, false); strings.Contains(text, "slurmdbd_fairshare_subtree_rank_max{") {
		t.Error("subtree ranks exported under classic without --collector.extended")
	}
}

// publishedText publishes snap and reads /metrics back as plain text,
// without the exporter's own live gauges.
func publishedText(t *testing.T, snap *result.Snapshot, extended bool) (*Collector, string) {
	t.Helper()
	c := New()
	c.Extended = extended
	at := time.Now()
	SetNow(c, func() time.Time { return at }) // the ages, at scrape time
	if err := c.Publish(snap); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	c.Handler(prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return c, rec.Body.String()
}

// TestPendingMetrics: the demo's pending jobs become the
// slurmdbd_priority_* series, one set per account, partition and QOS.
func TestPendingMetrics(t *testing.T) {
	snap := buildtest.Demo(time.Now(), 300)
	cl := &snap.Clusters[0]
	if len(cl.Pending) == 0 {
		t.Fatal("the demo has no pending jobs")
	}
	_, text := publishedText(t, snap, false)
	g := cl.Pending[0]
	l := fmt.Sprintf(`account="%s",partition="%s",qos="%s",slurm_cluster="demo"`, g.Account, g.Partition, g.QOS)
	for _, want := range []string{
		fmt.Sprintf("slurmdbd_priority_pending_jobs{%s} %d\n", l, g.Jobs),
		fmt.Sprintf("slurmdbd_priority_pending_job_priority_median{%s} %g\n", l, g.Median),
		fmt.Sprintf("slurmdbd_priority_pending_job_priority_max{%s} %g\n", l, g.Max),
		`slurmdbd_priority_weight{factor="fairshare",slurm_cluster="demo"} 100000` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q", want)
		}
	}
	dominated := 0
	for _, n := range g.Dominant {
		dominated += n
	}
	if dominated != g.Jobs {
		t.Errorf("%d jobs by dominant factor, %d jobs", dominated, g.Jobs)
	}
	if got := strings.Count(text, "slurmdbd_priority_pending_jobs{"); got != len(cl.Pending) {
		t.Errorf("%d pending_jobs series, %d groups", got, len(cl.Pending))
	}
}

// TestOwnMetricsGatheredOncePerSecond: concurrent scrapes share one
// gathering of the exporter's own metrics a second, each scrape renders
// the ages as of itself, and both reach the client whole.
func TestOwnMetricsGatheredOncePerSecond(t *testing.T) {
	c := New()
	if err := c.Publish(buildtest.Demo(time.Now(), 50)); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	SetNow(c, func() time.Time { return at })
	var gathered atomic.Int32
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "own_gatherings"}, func() float64 { return float64(gathered.Load()) }))
	h := c.Handler(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		gathered.Add(1)
		return reg.Gather()
	}))
	scrape := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); scrape() }()
	}
	wg.Wait()
	if n := gathered.Load(); n != 1 {
		t.Errorf("20 scrapes in the same second gathered %d times, want 1", n)
	}
	at = at.Add(1500 * time.Millisecond)
	body := scrape()
	if n := gathered.Load(); n != 2 {
		t.Errorf("a scrape 1.5 s later: %d gatherings, want 2", n)
	}
	if !strings.Contains(body, "own_gatherings 2\n") || !strings.Contains(body, "slurmdbd_exporter_snapshot_age_seconds ") || !strings.Contains(body, "slurmdbd_fairshare_shares{") {
		t.Errorf("scrape lacks its own metrics, the ages or the snapshot:\n%.2000s", body)
	}
}

// TestRecoveryMetric: recovery_seconds by default and under
// --collector.extended alike, one series per user association that has a
// value (+Inf rendered as such), with the moment of its computation.
func TestRecoveryMetric(t *testing.T) {
	snap := buildtest.Demo(time.Unix(1_800_000_000, 0), 50)
	cl := &snap.Clusters[0]
	cl.RecoveryComputed = time.Unix(1_799_996_400, 0)
	want := 0
	for i := range cl.Assocs {
		a := &cl.Assocs[i]
		a.Recovery = math.NaN()
		if a.User != "" {
			a.Recovery = []float64{0, 3600, math.Inf(1)}[want%3]
			want++
		}
	}
	for _, extended := range []bool{false, true} {
		_, text := publishedText(t, snap, extended)
		recoverySeries(t, text, cl.Name, want)
	}
}

func recoverySeries(t *testing.T, text, cluster string, want int) {
	t.Helper()
	got, inf := 0, 0
	ts := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "slurmdbd_fairshare_recovery_seconds{") && strings.Contains(l, `threshold="fair_level"`) {
			got++
			if strings.HasSuffix(l, "} +Inf") {
				inf++
			}
		}
		ts = ts || strings.HasPrefix(l, "slurmdbd_fairshare_recovery_computed_timestamp_seconds{slurm_cluster=\""+cluster+"\"} 1.7999964e+09")
	}
	if got != want || inf != want/3 {
		t.Errorf("%d recovery series (%d +Inf), expected one per user (%d, %d +Inf)", got, inf, want, want/3)
	}
	if !ts {
		t.Error("no recovery_computed_timestamp_seconds of the cluster")
	}
}

// TestBillingMetrics: one series of each per partition checked; no ratio
// where nothing was expected (a partition of CPU-less jobs).
func TestBillingMetrics(t *testing.T) {
	snap := buildtest.Demo(time.Now(), 20)
	cl := &snap.Clusters[0]
	cl.Billing = []result.Billing{{Partition: "gpu", Jobs: 3, Mismatched: 1, Recorded: 34, Expected: 35}, {Partition: "none", Jobs: 1}}
	_, text := publishedText(t, snap, false)
	for _, want := range []string{
		`slurmdbd_fairshare_billing_checked_jobs{partition="gpu",slurm_cluster="demo"} 3` + "\n",
		`slurmdbd_fairshare_billing_mismatched_jobs{partition="gpu",slurm_cluster="demo"} 1` + "\n",
		fmt.Sprintf(`slurmdbd_fairshare_billing_ratio{partition="gpu",slurm_cluster="demo"} %g`+"\n", 34.0/35),
		`slurmdbd_fairshare_billing_checked_jobs{partition="none",slurm_cluster="demo"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q", want)
		}
	}
	if strings.Contains(text, `slurmdbd_fairshare_billing_ratio{partition="none"`) {
		t.Error("a ratio over nothing expected")
	}
}

// TestSchemaInfo: one slurmdbd_schema_info series per cluster read from a
// database, its parts as "true"/"false" labels; none for a cluster not
// read from one (the demo's Schema is nil).
func TestSchemaInfo(t *testing.T) {
	snap := buildtest.Demo(time.Now(), 20)
	_, text := publishedText(t, snap, false)
	if strings.Contains(text, "slurmdbd_schema_info{") {
		t.Errorf("schema_info without a schema read:\n%s", text)
	}
	snap = buildtest.Demo(time.Now(), 20)
	snap.Clusters[0].Schema = &result.Schema{LftRgt: false, Lineage: true, AccountFlags: true, QOSUsage: false}
	_, text = publishedText(t, snap, false)
	want := `slurmdbd_schema_info{account_flags="true",lft_rgt="false",lineage="true",qos_usage="false",slurm_cluster="demo"} 1` + "\n"
	if n := strings.Count(text, "slurmdbd_schema_info{"); n != 1 || !strings.Contains(text, want) {
		t.Errorf("%d schema_info series, want one: %q", n, want)
	}
}

// TestNamedDriftMetrics: each named association is one drift_association
// series and one _bound with the same labels, and none is left once the
// association is no longer named (it recovered): the exposition is
// rendered anew at each publish.
func TestNamedDriftMetrics(t *testing.T) {
	snap := buildtest.Demo(time.Now(), 20)
	cl := &snap.Clusters[0]
	cl.Named = []result.DriftAssociation{
		{AssocKey: result.AssocKey{Account: "phys", User: "alice"}, Kind: result.DriftUsage, Value: "raw_usage", Cause: "reset", Drift: 0.75, Bound: 0.001},
		{AssocKey: result.AssocKey{Account: "chem", User: "bob", Partition: "gpu"}, Kind: result.DriftUsage, Value: "associations", Cause: "only_database", Drift: 1},
	}
	_, text := publishedText(t, snap, false)
	for _, want := range []string{
		`slurmdbd_fairshare_drift_association{account="phys",cause="reset",kind="usage",partition="",slurm_cluster="demo",user="alice",value="raw_usage"} 0.75` + "\n",
		`slurmdbd_fairshare_drift_association_bound{account="phys",cause="reset",kind="usage",partition="",slurm_cluster="demo",user="alice",value="raw_usage"} 0.001` + "\n",
		`slurmdbd_fairshare_drift_association{account="chem",cause="only_database",kind="usage",partition="gpu",slurm_cluster="demo",user="bob",value="associations"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q", want)
		}
	}
	cl.Named = nil
	if _, text = publishedText(t, snap, false); strings.Contains(text, "slurmdbd_fairshare_drift_association{") {
		t.Error("drift_association series after the associations recovered")
	}
}
