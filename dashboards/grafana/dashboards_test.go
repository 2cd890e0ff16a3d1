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
		j, err := JSON(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = j
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
		Defaults struct {
			Unit  string
			Links []struct{ Title, URL string }
		}
	}
	Targets []struct {
		Expr, LegendFormat string
		Datasource         struct{ Type, UID string }
	}
}

type variable struct {
	Name, Type, Definition, Regex string
	Query                         any
	Datasource                    *struct{ Type, UID string }
	IncludeAll                    bool
	Current                       struct{ Text, Value any }
}

type boardJSON struct {
	Inputs []struct {
		Name, Type, PluginID string
	} `json:"__inputs"`
	Requires []struct {
		Type, ID, Version string
	} `json:"__requires"`
	UID        string
	Links      []struct{ Type string }
	Panels     []panel
	Templating struct {
		List []variable
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
// labels of its query's metrics; every selector picks the exporter with
// the job and instance variables, and none pins a job or an instance;
// rate windows follow $__rate_interval.
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
						labels["job"], labels["instance"] = true, true
						picked := map[string]bool{}
						for _, m := range n.LabelMatchers {
							if m.Name == "__name__" {
								continue
							}
							if m.Name == "job" || m.Name == "instance" {
								// promQL turned the variable into x
								if m.Type.String() != "=~" || m.Value != "x" {
									t.Errorf("%s: %s %s %q: expected %s=~\"$%s\"", where, n.Name, m.Name, m.Value, m.Name, m.Name)
								}
								picked[m.Name] = true
								continue
							}
							if !slices.Contains(have, m.Name) {
								t.Errorf("%s: %s has no label %s", where, n.Name, m.Name)
							}
						}
						if !picked["job"] || !picked["instance"] {
							t.Errorf("%s: %s without job=~\"$job\" and instance=~\"$instance\"", where, n.Name)
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

// TestImportable: each dashboard imports from a file or grafana.com
// asking for the Prometheus data source (__inputs, which the datasource
// variable defaults to), lists what it needs (__requires: Grafana, the
// Prometheus data source, each panel plugin used), lets the exporter be
// chosen (job and instance variables) and links to the other dashboards.
func TestImportable(t *testing.T) {
	for name, b := range boards(t) {
		if len(b.Inputs) != 1 || b.Inputs[0].Name != "DS_PROMETHEUS" || b.Inputs[0].Type != "datasource" || b.Inputs[0].PluginID != "prometheus" {
			t.Errorf("%s: __inputs %+v: expected the one Prometheus data source DS_PROMETHEUS", name, b.Inputs)
		}
		need := map[string]bool{"grafana/grafana": true, "datasource/prometheus": true}
		for _, p := range b.Panels {
			if p.Type != "row" {
				need["panel/"+p.Type] = true
			}
		}
		for _, r := range b.Requires {
			if !need[r.Type+"/"+r.ID] {
				t.Errorf("%s: __requires %s %s, which it does not use", name, r.Type, r.ID)
			}
			delete(need, r.Type+"/"+r.ID)
		}
		for n := range need {
			t.Errorf("%s: %s missing from __requires", name, n)
		}
		vars := map[string]variable{}
		for _, v := range b.Templating.List {
			vars[v.Name] = v
		}
		if v := vars["datasource"]; v.Current.Value != "${DS_PROMETHEUS}" {
			t.Errorf("%s: the datasource variable defaults to %v, not the imported ${DS_PROMETHEUS}", name, v.Current.Value)
		}
		if vars["job"].Type != "query" || vars["instance"].Type != "query" {
			t.Errorf("%s: no job and instance variables", name)
		}
		if len(b.Links) == 0 || b.Links[0].Type != "dashboards" {
			t.Errorf("%s: no link to the other dashboards", name)
		}
	}
}

// TestDescriptions: every panel's description says where its values come
// from: it names a metric or recorded series its queries read.
func TestDescriptions(t *testing.T) {
	known := exported(t)
	for name, b := range boards(t) {
		for _, p := range b.Panels {
			if p.Type == "row" {
				continue
			}
			named := false
			for _, tg := range p.Targets {
				expr, err := parser.ParseExpr(promQL(tg.Expr))
				if err != nil {
					continue // TestQueries reports it
				}
				parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok && strings.Contains(p.Description, vs.Name) {
						if _, ok := known[vs.Name]; ok {
							named = true
						}
					}
					return nil
				})
			}
			if !named {
				t.Errorf("%s: %q: the description names none of the metrics its queries read", name, p.Title)
			}
		}
	}
}

// TestLinks: every data link opens a bundled dashboard with variables it
// has; the overview's consumers and lowest factors open the drill-down
// on the account and user clicked.
func TestLinks(t *testing.T) {
	all := boards(t)
	byUID := map[string]boardJSON{}
	for _, b := range all {
		byUID[b.UID] = b
	}
	link := regexp.MustCompile(`^/d/([\w-]+)/\?(.*)$`)
	toUser := 0
	for name, b := range all {
		for _, p := range b.Panels {
			for _, l := range p.FieldConfig.Defaults.Links {
				m := link.FindStringSubmatch(l.URL)
				if m == nil {
					t.Errorf("%s: %q: link %s is not to a dashboard", name, p.Title, l.URL)
					continue
				}
				to, ok := byUID[m[1]]
				if !ok {
					t.Errorf("%s: %q: link to %s, which is not bundled", name, p.Title, m[1])
					continue
				}
				has := map[string]bool{}
				for _, v := range to.Templating.List {
					has[v.Name] = true
				}
				for _, param := range strings.Split(m[2], "&") {
					v, ok := strings.CutPrefix(param, "var-")
					if !ok {
						if s := grafanaVar.FindStringSubmatch(param); s != nil && !strings.HasPrefix(s[1], "__") {
							v = s[1]
						} else {
							continue
						}
					}
					v, _, _ = strings.Cut(v, "=")
					if !has[v] {
						t.Errorf("%s: %q: link sets %s, which %s does not have", name, p.Title, v, m[1])
					}
				}
				if name == "fairshare-overview.json" && strings.Contains(l.URL, "var-account=") && strings.Contains(l.URL, "var-user=") {
					toUser++
				}
			}
		}
	}
	if toUser < 2 {
		t.Errorf("%d overview panels drill down to an association, want the top users and the lowest factors", toUser)
	}
}
