package grafana

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
)

var update = flag.Bool("update", false, "rewrite the dashboards' JSON (make dashboards)")

// generated is each dashboard as the JSON Grafana gets.
func generated(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, b := range All() {
		d, err := b.Build()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		j, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = append(j, '\n')
	}
	return out
}

// TestGenerated: the committed JSON is what the code builds.
func TestGenerated(t *testing.T) {
	for name, want := range generated(t) {
		path := filepath.Join("..", name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("dashboards/%s is stale: run make dashboards (%v)", name, err)
		}
	}
}

type panel struct {
	Type        string
	Title       string
	Description string
	Datasource  struct{ Type, UID string }
	FieldConfig struct {
		Defaults struct{ Unit string }
	}
	Targets []struct {
		Expr, LegendFormat string
		Datasource         struct{ Type, UID string }
	}
}

type boardJSON struct {
	Panels     []panel
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
			Datasource *struct{ Type, UID string }
		}
	}
}

func boards(t *testing.T) map[string]boardJSON {
	t.Helper()
	out := map[string]boardJSON{}
	for name, j := range generated(t) {
		var b boardJSON
		if err := json.Unmarshal(j, &b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(b.Panels) == 0 {
			t.Fatalf("%s: no panels", name)
		}
		out[name] = b
	}
	return out
}

// grafanaVar is a Grafana variable in a query: $name, ${name}, ${name:fmt}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)

// promQL turns a panel query into what Prometheus gets: Grafana replaces
// the range variables with durations, and the others with values.
func promQL(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(v, "$__") || strings.HasPrefix(v, "${__") {
			return "5m"
		}
		return "x"
	})
}

// exported is every metric name the queries may use, with its labels: the
// collector's descriptors, the Go and process collectors' few the
// dashboards could use, and the recording rules of ../prometheus/rules.yml
// (labels: those of the metric they are named after, plus quantile).
func exported(t *testing.T) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, mi := range collector.Metrics {
		m[mi.Name] = mi.Labels
	}
	b, err := os.ReadFile(filepath.Join("..", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		_, name, ok := strings.Cut(strings.TrimSpace(l), "- record: ")
		if !ok {
			continue
		}
		parts := strings.Split(name, ":")
		if len(parts) != 3 {
			t.Fatalf("recording rule %s: expected level:metric:operations", name)
		}
		base, ok := m[parts[1]]
		if !ok {
			t.Fatalf("recording rule %s: no metric %s", name, parts[1])
		}
		m[name] = append(slices.Clone(base), "quantile")
	}
	return m
}

// TestQueries: every query parses as PromQL and names only metrics and
// labels the exporter (or its recording rules) has; every legend names
// labels of its query's metrics; no query pins a job or an instance; rate
// windows follow $__rate_interval.
func TestQueries(t *testing.T) {
	known := exported(t)
	legend := regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	queries := 0
	for name, b := range boards(t) {
		for _, p := range b.Panels {
			if p.Type == "row" {
				continue
			}
			for _, target := range p.Targets {
				queries++
				where := name + ": " + p.Title + ": " + target.Expr
				expr, err := parser.ParseExpr(promQL(target.Expr))
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				labels := map[string]bool{}
				parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
					switch n := n.(type) {
					case *parser.VectorSelector:
						have, ok := known[n.Name]
						if !ok {
							t.Errorf("%s: metric %s is not exported", where, n.Name)
							return nil
						}
						for _, l := range have {
							labels[l] = true
						}
						for _, m := range n.LabelMatchers {
							if m.Name == "__name__" {
								continue
							}
							if m.Name == "job" || m.Name == "instance" {
								t.Errorf("%s: hard-coded %s", where, m.Name)
							}
							if !slices.Contains(have, m.Name) {
								t.Errorf("%s: %s has no label %s", where, n.Name, m.Name)
							}
						}
					case *parser.Call:
						if slices.Contains([]string{"rate", "irate", "increase", "delta", "deriv"}, n.Func.Name) && !strings.Contains(target.Expr, "[$__rate_interval]") {
							t.Errorf("%s: %s over a fixed window: expected [$__rate_interval]", where, n.Func.Name)
						}
					}
					return nil
				})
				for _, m := range legend.FindAllStringSubmatch(target.LegendFormat, -1) {
					if !labels[m[1]] {
						t.Errorf("%s: legend names %s, which the query's metrics do not have", where, m[1])
					}
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("only %d queries checked", queries)
	}
}

// TestLint: the essential rules of grafana/dashboard-linter (whose module
// cannot be fetched here), on the JSON Grafana gets: a Prometheus
// datasource variable that every panel, query and query variable uses;
// every variable used, every variable used defined; a unit, a title and a
// description on every panel; the cluster selectable where association
// metrics are shown.
func TestLint(t *testing.T) {
	for name, b := range boards(t) {
		vars := map[string]bool{}
		hasDS := false
		for _, v := range b.Templating.List {
			vars[v.Name] = false
			if v.Name == "datasource" {
				hasDS = v.Type == "datasource" && v.Query == "prometheus"
				vars[v.Name] = true
				continue
			}
			if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
				t.Errorf("%s: variable %s does not query ${datasource}", name, v.Name)
			}
		}
		if !hasDS {
			t.Errorf("%s: no Prometheus datasource variable named datasource", name)
		}
		use := func(where, s string) {
			for _, m := range grafanaVar.FindAllStringSubmatch(s, -1) {
				if strings.HasPrefix(m[1], "__") {
					continue
				}
				if _, ok := vars[m[1]]; !ok {
					t.Errorf("%s: %s uses $%s, which is not defined", name, where, m[1])
				}
				vars[m[1]] = true
			}
		}
		for _, v := range b.Templating.List {
			if s, ok := v.Query.(string); ok {
				use("variable "+v.Name, s)
			}
		}
		for _, p := range b.Panels {
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Description == "" {
				t.Errorf("%s: a %s panel %q without a title or description", name, p.Type, p.Title)
			}
			if p.FieldConfig.Defaults.Unit == "" {
				t.Errorf("%s: %q has no unit", name, p.Title)
			}
			if p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: %q uses datasource %q, not ${datasource}", name, p.Title, p.Datasource.UID)
			}
			for _, tg := range p.Targets {
				if tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s: a query of %q uses datasource %q", name, p.Title, tg.Datasource.UID)
				}
				use(p.Title, tg.Expr)
				if strings.Contains(tg.Expr, "slurmdbd_fairshare_") && !strings.Contains(tg.Expr, "$slurm_cluster") {
					t.Errorf("%s: %q: an association query without the cluster variable", name, p.Title)
				}
			}
		}
		for v, used := range vars {
			if !used {
				t.Errorf("%s: variable %s is never used", name, v)
			}
		}
	}
}
