// Package prometheus_test checks the bundled Prometheus rules: promtool
// accepts rules.yml and passes the unit tests of rules_test.yml, and every
// metric, label and label value the rules use is one the exporter exports.
package prometheus_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build/buildtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/collector"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

const (
	rulesFile  = "rules.yml"
	testsFile  = "rules_test.yml"
	alertsDoc  = "../../docs/alerts.md"
	runbookURL = "https://github.com/slurmdbd-exporter/slurmdbd_exporter/blob/main/docs/alerts.md#"
)

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// TestPromtool runs promtool's own checks: the rule file is valid
// (syntax, templates, and no duplicate rules: lint errors are fatal) and
// its unit tests pass. promtool comes from Debian's prometheus package
// (2.42).
func TestPromtool(t *testing.T) {
	testenv.Require(t, []string{"promtool"}, []string{"prometheus"})
	for _, args := range [][]string{
		{"check", "rules", "--lint=all", "--lint-fatal", rulesFile},
		{"test", "rules", testsFile},
	} {
		out, err := exec.Command("promtool", args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, testenv.Tail(out))
			continue
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestRulesUseExportedMetrics checks every expression of rules.yml against
// what the exporter exports: metric names and label names from the
// collector's descriptors (plus the rules' own records and the target
// labels), and the values of the labels the alerts select on (drift kind
// and value, source, stage) from what build.Build and the refresh loop
// emit, so a selector that can never match fails here rather than stays
// silent in production.
func TestRulesUseExportedMetrics(t *testing.T) {
	rules := readRules(t)
	labels := map[string][]string{} // metric -> label names it can carry
	for _, m := range collector.Metrics {
		labels[m.Name] = append(slices.Clone(m.Labels), targetLabels...)
	}
	values := exportedValues(t)
	exprs := map[*rule]*exprInfo{}
	for _, r := range rules {
		info, err := parseExpr(r.Expr)
		if err != nil {
			t.Errorf("%s line %d: %v", rulesFile, r.Line, err)
			continue
		}
		exprs[r] = info
		if r.Kind == "record" {
			// a record carries at most the labels of what it is computed
			// from and the labels the rule sets
			var ls []string
			for _, m := range info.Metrics {
				ls = append(ls, labels[m]...)
			}
			for l := range r.Labels {
				ls = append(ls, l)
			}
			labels[r.Name] = append(labels[r.Name], ls...)
		}
	}
	for _, r := range rules {
		info := exprs[r]
		if info == nil {
			continue
		}
		where := fmt.Sprintf("%s line %d (%s)", rulesFile, r.Line, r.Name)
		var available []string // every label any metric of the expression carries
		for _, m := range info.Metrics {
			ls, ok := labels[m]
			if !ok {
				t.Errorf("%s: metric %s is not exported (nor recorded by %s)", where, m, rulesFile)
			}
			available = append(available, ls...)
		}
		for _, sel := range info.Selectors {
			if _, ok := labels[sel.Metric]; !ok {
				continue // reported above
			}
			pairs := map[string]string{}
			for _, mt := range sel.Matchers {
				if !slices.Contains(labels[sel.Metric], mt.Label) {
					t.Errorf("%s: %s has no label %q", where, sel.Metric, mt.Label)
					continue
				}
				if mt.Op == "=" {
					pairs[mt.Label] = mt.Value
				}
				known, ok := values[mt.Label]
				if !ok {
					continue
				}
				for _, v := range matcherValues(mt) {
					if !slices.Contains(known, v) {
						t.Errorf("%s: %s{%s%s%q}: the exporter exports no %s=%q (it exports %s)", where, sel.Metric, mt.Label, mt.Op, mt.Value, mt.Label, v, strings.Join(known, ", "))
					}
				}
			}
			// a drift value that exists, but not for the selected kind
			if kind, ok := pairs["kind"]; ok {
				for _, mt := range sel.Matchers {
					if mt.Label != "value" {
						continue
					}
					for _, v := range matcherValues(mt) {
						if !slices.Contains(values["value/"+kind], v) {
							t.Errorf("%s: %s: the exporter exports no value=%q for kind=%q (it exports %s)", where, sel.Metric, v, kind, strings.Join(values["value/"+kind], ", "))
						}
					}
				}
			}
		}
		for _, l := range info.Grouping {
			if !slices.Contains(available, l) && r.Labels[l] == "" {
				t.Errorf("%s: label %q in by/without/on/ignoring/group_* is carried by none of %s", where, l, strings.Join(info.Metrics, ", "))
			}
		}
		if r.Kind != "alert" {
			continue
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", where, a)
			}
		}
		for _, text := range r.Annotations {
			for _, m := range regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`).FindAllStringSubmatch(text, -1) {
				if !slices.Contains(available, m[1]) && r.Labels[m[1]] == "" {
					t.Errorf("%s: annotation uses $labels.%s, which none of %s carries", where, m[1], strings.Join(info.Metrics, ", "))
				}
			}
		}
	}
}

// TestRunbooks checks that each alert's runbook_url points at its own
// section of docs/alerts.md and that the section exists.
func TestRunbooks(t *testing.T) {
	doc, err := os.ReadFile(alertsDoc)
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(string(doc), -1) {
		headings[m[1]] = true
	}
	alerts := 0
	for _, r := range readRules(t) {
		if r.Kind != "alert" {
			continue
		}
		alerts++
		if want := runbookURL + strings.ToLower(r.Name); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Name, r.Annotations["runbook_url"], want)
		}
		if !headings[r.Name] {
			t.Errorf("%s: no section \"## %s\" in %s", r.Name, r.Name, alertsDoc)
		}
	}
	if alerts == 0 {
		t.Fatalf("no alerts read from %s", rulesFile)
	}
}

// TestEveryAlertTested checks that rules_test.yml has, for every alert, a
// case where it fires and one where it does not.
func TestEveryAlertTested(t *testing.T) {
	b, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		m := regexp.MustCompile(`^\s*(?:- )?alertname:\s*(\S+)\s*$`).FindStringSubmatch(line)
		if m == nil {
			continue
		}
		// exp_alerts follows, either [] or a list
		for _, next := range lines[i+1:] {
			next = strings.TrimSpace(next)
			if next == "" || strings.HasPrefix(next, "#") || strings.HasPrefix(next, "eval_time:") {
				continue
			}
			switch {
			case next == "exp_alerts: []":
				silent[m[1]] = true
			case next == "exp_alerts:":
				fires[m[1]] = true
			default:
				t.Errorf("%s line %d: alertname %s not followed by exp_alerts", testsFile, i+1, m[1])
			}
			break
		}
	}
	for _, r := range readRules(t) {
		if r.Kind != "alert" {
			continue
		}
		if !fires[r.Name] {
			t.Errorf("%s: no case in %s where it fires", r.Name, testsFile)
		}
		if !silent[r.Name] {
			t.Errorf("%s: no case in %s where it stays silent", r.Name, testsFile)
		}
	}
}

// exportedValues are the values the exporter gives the labels the rules
// select on: drift kinds and values from the demo cluster (Fair Tree, the
// superset: rank drift exists only there), built by build.Build like a
// real one; sources from the same snapshot; stages from the refresh loop.
// "value/<kind>" lists the values of one kind.
func exportedValues(t *testing.T) map[string][]string {
	t.Helper()
	snap := buildtest.Demo(time.Unix(1.8e9, 0), 50)
	v := map[string][]string{
		"stage": {result.StageConfig, result.StageConnect, result.StageDB, result.StageExtras, result.StageReported, result.StageBuild, result.StagePublish},
	}
	add := func(label, value string) {
		if !slices.Contains(v[label], value) {
			v[label] = append(v[label], value)
		}
	}
	for _, cl := range snap.Clusters {
		for _, d := range cl.Drift {
			add("kind", d.Kind)
			add("value", d.Value)
			add("value/"+d.Kind, d.Value)
		}
	}
	for s := range snap.Sources {
		add("source", s)
	}
	for _, l := range []string{"kind", "value", "source"} {
		if len(v[l]) == 0 {
			t.Fatalf("the demo snapshot has no %s values", l)
		}
		slices.Sort(v[l])
	}
	return v
}

// matcherValues are the values a matcher names: its value, or the
// alternatives of a regular expression made of plain words only.
func matcherValues(m matcher) []string {
	if m.Op == "=" || m.Op == "!=" {
		if m.Value == "" {
			return nil // "present" / "absent": no value to check
		}
		return []string{m.Value}
	}
	if regexp.MustCompile(`^[a-zA-Z0-9_|]+$`).MatchString(m.Value) {
		return strings.Split(m.Value, "|")
	}
	return nil
}

// rule is one rule of rules.yml.
type rule struct {
	Kind        string // record or alert
	Name        string
	Expr        string
	Labels      map[string]string
	Annotations map[string]string
	Line        int
}

var (
	ruleStart = regexp.MustCompile(`^(\s*)- (record|alert):\s*(\S+)\s*$`)
	keyLine   = regexp.MustCompile(`^(\s*)([a-z_]+):\s*(.*)$`)
)

// readRules reads rules.yml line by line: the module has no YAML parser
// of its own to depend on, and promtool check rules validates the YAML
// itself. It handles what rule files use: plain, quoted and block
// scalars (| and >, with chomping indicators) and one level of mapping
// (labels, annotations). Anything else fails the test.
func readRules(t *testing.T) []*rule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var rules []*rule
	var cur *rule
	keyIndent := -1
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := ruleStart.FindStringSubmatch(line); m != nil {
			cur = &rule{Kind: m[2], Name: m[3], Line: i + 1, Labels: map[string]string{}, Annotations: map[string]string{}}
			rules = append(rules, cur)
			keyIndent = len(m[1]) + 2
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if cur == nil || m == nil || len(m[1]) != keyIndent {
			if cur != nil && m != nil && len(m[1]) < keyIndent {
				cur = nil // the rule list ended
			}
			continue
		}
		switch key, val := m[2], m[3]; key {
		case "expr":
			s, n, err := scalar(lines, i, keyIndent, val)
			if err != nil {
				t.Fatalf("%s line %d: %v", rulesFile, i+1, err)
			}
			cur.Expr, i = s, n
		case "labels", "annotations":
			if strings.TrimSpace(val) != "" {
				t.Fatalf("%s line %d: %s: only block mappings are read", rulesFile, i+1, key)
			}
			dst := cur.Labels
			if key == "annotations" {
				dst = cur.Annotations
			}
			for i+1 < len(lines) {
				e := keyLine.FindStringSubmatch(lines[i+1])
				if e == nil {
					if strings.TrimSpace(lines[i+1]) == "" {
						i++
						continue
					}
					break
				}
				if len(e[1]) <= keyIndent {
					break
				}
				s, n, err := scalar(lines, i+1, len(e[1]), e[3])
				if err != nil {
					t.Fatalf("%s line %d: %v", rulesFile, i+2, err)
				}
				dst[e[2]], i = s, n
			}
		}
	}
	if len(rules) == 0 {
		t.Fatalf("no rules read from %s", rulesFile)
	}
	for _, r := range rules {
		if strings.TrimSpace(r.Expr) == "" {
			t.Fatalf("%s line %d: %s %s: no expr read", rulesFile, r.Line, r.Kind, r.Name)
		}
	}
	return rules
}

// scalar reads the value of the key on line i (indented by indent): val
// itself, or the block scalar that follows. It returns the last line read.
func scalar(lines []string, i, indent int, val string) (string, int, error) {
	val = strings.TrimSpace(val)
	switch {
	case val == "":
		return "", i, fmt.Errorf("empty value")
	case strings.HasPrefix(val, "|") || strings.HasPrefix(val, ">"):
		var block []string
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			block = append(block, strings.TrimSpace(next))
			i++
		}
		sep := "\n"
		if val[0] == '>' {
			sep = " "
		}
		return strings.TrimSpace(strings.Join(block, sep)), i, nil
	case val[0] == '"':
		s, err := strconv.Unquote(val)
		return s, i, err
	case val[0] == '\'':
		if len(val) < 2 || val[len(val)-1] != '\'' {
			return "", i, fmt.Errorf("unterminated quoted scalar %s", val)
		}
		return strings.ReplaceAll(val[1:len(val)-1], "''", "'"), i, nil
	case val[0] == '{' || val[0] == '[':
		return "", i, fmt.Errorf("flow collection %s: quote it", val)
	}
	if j := strings.Index(val, " #"); j >= 0 {
		val = strings.TrimSpace(val[:j])
	}
	return val, i, nil
}

// matcher is one label matcher of a selector.
type matcher struct{ Label, Op, Value string }

// selector is a metric name with its matchers.
type selector struct {
	Metric   string
	Matchers []matcher
}

// exprInfo is what an expression uses.
type exprInfo struct {
	Metrics   []string
	Selectors []selector
	// Grouping are the labels named in by, without, on, ignoring and
	// group_left/group_right lists.
	Grouping []string
}

// promqlWords are the identifiers of PromQL that are not metric names:
// operators, modifiers, aggregations and functions (the ones a rule file
// is likely to use; an unlisted one fails the test as an unknown metric,
// and is added here).
var promqlWords = strings.Fields(`
	and or unless bool offset by without on ignoring group_left group_right
	sum min max avg count stddev stdvar topk bottomk quantile count_values group
	abs absent absent_over_time ceil changes clamp clamp_max clamp_min delta deriv
	exp floor histogram_quantile idelta increase irate label_join label_replace
	ln log2 log10 predict_linear rate resets round scalar sgn sort sort_desc sqrt
	time timestamp vector avg_over_time min_over_time max_over_time sum_over_time
	count_over_time quantile_over_time stddev_over_time stdvar_over_time
	last_over_time present_over_time Inf NaN inf nan`)

var groupingWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// parseExpr scans a PromQL expression for metric names, selectors and
// grouping labels. It is a scanner, not a parser: promtool checks syntax.
func parseExpr(s string) (*exprInfo, error) {
	info := &exprInfo{}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	skipSpace := func(i int) int {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
		return i
	}
	lastMetric, lastEnd := "", -1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated string in %q", s)
			}
			i += j + 2
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated range in %q", s)
			}
			i += j + 1
		case c == '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("unterminated selector in %q", s)
			}
			if lastEnd < 0 || skipSpace(lastEnd) != i {
				return nil, fmt.Errorf("selector without a metric name in %q", s)
			}
			ms, err := parseMatchers(s[i+1 : i+j])
			if err != nil {
				return nil, err
			}
			info.Selectors = append(info.Selectors, selector{Metric: lastMetric, Matchers: ms})
			i += j + 1
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i], false) || s[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(s) && isIdent(s[j], false) {
				j++
			}
			word := s[i:j]
			i = j
			lastEnd = -1
			switch {
			case slices.Contains(groupingWords, word):
				k := skipSpace(i)
				if k >= len(s) || s[k] != '(' {
					continue // group_left without a list
				}
				end := strings.IndexByte(s[k:], ')')
				if end < 0 {
					return nil, fmt.Errorf("unterminated %s list in %q", word, s)
				}
				for _, l := range strings.Split(s[k+1:k+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						info.Grouping = append(info.Grouping, l)
					}
				}
				i = k + end + 1
			case slices.Contains(promqlWords, word):
			default:
				if !slices.Contains(info.Metrics, word) {
					info.Metrics = append(info.Metrics, word)
				}
				lastMetric, lastEnd = word, i
			}
		default:
			i++
		}
	}
	return info, nil
}

var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)

func parseMatchers(s string) ([]matcher, error) {
	var ms []matcher
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		m := matcherRE.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("matcher %q: not label op \"value\"", part)
		}
		v, err := strconv.Unquote(`"` + m[3] + `"`)
		if err != nil {
			return nil, fmt.Errorf("matcher %q: %w", part, err)
		}
		ms = append(ms, matcher{Label: m[1], Op: m[2], Value: v})
	}
	return ms, nil
}

// TestParseExpr pins the scanner on the shapes rules.yml uses.
func TestParseExpr(t *testing.T) {
	info, err := parseExpr(`sum without (user, partition) (increase(slurmdbd_exporter_stage_errors_total{stage=~"db|connect"}[15m]))
		/ ignoring (account) group_left () (a:b:sum > 0.5e3) or slurmdbd_exporter_up{source="db"} == 0`)
	if err != nil {
		t.Fatal(err)
	}
	want := &exprInfo{
		Metrics: []string{"slurmdbd_exporter_stage_errors_total", "a:b:sum", "slurmdbd_exporter_up"},
		Selectors: []selector{
			{Metric: "slurmdbd_exporter_stage_errors_total", Matchers: []matcher{{"stage", "=~", "db|connect"}}},
			{Metric: "slurmdbd_exporter_up", Matchers: []matcher{{"source", "=", "db"}}},
		},
		Grouping: []string{"user", "partition", "account"},
	}
	if fmt.Sprint(info) != fmt.Sprint(want) {
		t.Errorf("parseExpr:\n got %+v\nwant %+v", info, want)
	}
	for _, bad := range []string{`{source="db"}`, `up{source="db"`, `x{source=db}`} {
		if _, err := parseExpr(bad); err == nil {
			t.Errorf("parseExpr(%q): no error", bad)
		}
	}
}
