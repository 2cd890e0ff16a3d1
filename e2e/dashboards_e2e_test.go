package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// mayBeEmpty starts the sentence of a panel's description that says the
// panel may be empty on a healthy cluster (dashboards/grafana: MayBeEmpty);
// such a panel's empty queries are logged, not failed.
const mayBeEmpty = "May be empty: "

// The dashboard's range as Grafana queries it by default: the last 7 days
// (the dashboards' time), at the step Grafana picks for a panel some 1000
// pixels wide, and $__rate_interval from that step and the data source's
// default scrape interval (15 s): max(interval + scrape, 4 × scrape).
const (
	dashRange    = 7 * 24 * time.Hour
	dashStep     = 10 * time.Minute
	rateInterval = "615s"
)

// TestDashboards opens every bundled dashboard as a new user would: serve
// --demo with no other flag, scraped by a real Prometheus evaluating the
// shipped rules.yml, each template variable set as Grafana sets it by
// default (its query run against Prometheus, sorted as the variable says,
// the first value, or All where offered), and runs every panel query. A
// query that returns no series, or an error, fails the test: the demo
// runs the production loop over a simulated cluster, so even the panels
// that say they may be empty show something, but the table of the last
// usage losses, empty until the first fault (TestDemoAlerts sees it
// filled). A minute later the queries run again: the demo's values move
// (usage decays, jobs start and end, stages take their time), and the
// ones that cannot (shares, settings, counts of a fixed tree) are named.
func TestDashboards(t *testing.T) {
	testenv.Require(t, []string{"prometheus"}, []string{"prometheus"})
	t.Parallel() // no Slurm: beside the replays
	boards := readDashboards(t, "../dashboards")
	s := startServe(t, os.Environ(), "--demo")
	p := startPrometheus(t, strings.TrimPrefix(s.url, "http://"))
	waitEvaluated(t, p)

	// what can still change is how many scrapes and evaluations
	// Prometheus has, and the first forecast: a few more rounds
	deadline := time.Now().Add(30 * time.Second)
	var first []queryResult
	for {
		var problems []string
		first, problems = checkDashboards(t, p.url, boards, time.Now(), emptyBeforeFaults)
		if len(problems) == 0 {
			if len(first) < 40 {
				t.Fatalf("only %d panel queries checked", len(first))
			}
			t.Logf("%d panel queries of %d dashboards return series", len(first), len(boards))
			break
		}
		if time.Now().After(deadline) {
			for _, pr := range problems {
				t.Error(pr)
			}
			return
		}
		time.Sleep(2 * time.Second)
	}
	time.Sleep(time.Minute)
	later, problems := checkDashboards(t, p.url, boards, time.Now(), emptyBeforeFaults)
	for _, pr := range problems {
		t.Error(pr)
	}
	moved := map[string]bool{}
	for i, q := range later {
		if i >= len(first) || first[i].where != q.where {
			t.Fatalf("query %d: %s, then %s", i, first[i].where, q.where)
		}
		moved[q.panel] = moved[q.panel] || first[i].values != q.values
	}
	var still []string
	for panel, m := range moved {
		switch {
		case !m && staticPanels[panel] == "":
			t.Errorf("panel %q: its values did not move in a minute of the demo", panel)
		case !m:
			still = append(still, panel)
		}
	}
	slices.Sort(still)
	t.Logf("%d of %d panels moved in a minute; static: %v", len(moved)-len(still), len(moved), still)
}

// emptyBeforeFaults: the panels of the demo that are empty until its first
// fault (a healthy cluster's).
func emptyBeforeFaults(panel string) bool {
	return panel == "Last usage losses" || emptyWhenHealthy(panel)
}

// emptyWhenHealthy: the panels that are empty whenever nothing drifts,
// after the faults too (TestDemoAlerts sees them filled during one).
func emptyWhenHealthy(panel string) bool { return panel == "Drifting associations" }

// staticPanels are the panels whose values a minute of the demo need not
// move, and why; every other panel's must.
var staticPanels = map[string]string{
	// the tree's size, its settings, the sources' health
	"Accounts":           "a fixed tree",
	"User associations":  "a fixed tree",
	"Clusters read":      "one cluster",
	"Sources up":         "up",
	"Reported source up": "up",
	"Stage errors":       "0 while healthy",
	// known from slurmctld's boot at its first pass (passes.BootPhase),
	// pinned at the second: the same from then on
	"Decay-pass phase": "the phase pinned at the second pass",
	// the demo's jobs are billed as its slurm.conf says
	"Billing ratio": "1 while healthy",
	// drift and losses: 0 until the first fault (TestDemoAlerts)
	"Algorithm mismatch":            "0 while healthy",
	"Associations beyond tolerance": "0 while healthy",
	"Beyond tolerance: formula":     "0 while healthy",
	"Beyond tolerance: usage":       "0 while healthy",
	"Associations left out":         "0: the demo is under --collector.max-associations",
	"Usage losses":                  "0 while healthy",
	"Last usage losses":             "empty while healthy",
	"Drifting associations":         "empty while healthy",
	// Fair Tree's factor is a rank: its distribution is the same at every
	// moment, a user's moves only when the order changes
	"Factor distribution":               "Fair Tree ranks",
	"Median user factor":                "Fair Tree ranks",
	"Fairshare factor":                  "Fair Tree rank",
	"Rank among all users (Fair Tree)":  "Fair Tree rank",
	"Lowest fairshare factors":          "Fair Tree ranks",
	"Ranks of the users under $account": "Fair Tree ranks",
}

// grafanaDashboard is what the test reads of a dashboard's JSON.
type grafanaDashboard struct {
	file       string
	Title      string
	Panels     []grafanaPanel
	Templating struct {
		List []grafanaVariable
	}
}

type grafanaPanel struct {
	Type, Title, Description string
	Targets                  []struct {
		Expr    string
		Instant bool
		RefID   string `json:"refId"`
	}
	Panels []grafanaPanel // a collapsed row's
}

type grafanaVariable struct {
	Name, Type, Regex, AllValue string
	Query                       any
	Sort                        int
	Multi, IncludeAll           bool
}

func readDashboards(t *testing.T, dir string) []grafanaDashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s (%v)", dir, err)
	}
	var out []grafanaDashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := grafanaDashboard{file: filepath.Base(f)}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// queryResult is a panel query and its values at the moment checked.
type queryResult struct {
	panel, where, values string
}

// checkDashboards resolves each dashboard's variables and runs its panel
// queries at end, returning each query's values at end and what went
// wrong: an error, or no series unless mayEmpty(panel title).
func checkDashboards(t *testing.T, promURL string, boards []grafanaDashboard, end time.Time, mayEmpty func(string) bool) (results []queryResult, problems []string) {
	t.Helper()
	for _, d := range boards {
		vars, errs := resolveVariables(promURL, d, end)
		t.Logf("%s: %s", d.file, vars)
		for _, e := range errs {
			problems = append(problems, d.file+": "+e)
		}
		var panels []grafanaPanel
		for _, p := range d.Panels {
			panels = append(panels, p)
			panels = append(panels, p.Panels...)
		}
		for _, p := range panels {
			if p.Type == "row" {
				continue
			}
			for _, tg := range p.Targets {
				expr := vars.interpolate(tg.Expr)
				where := fmt.Sprintf("%s: %q query %s: %s", d.file, p.Title, tg.RefID, expr)
				n, err := countSeries(promURL, expr, tg.Instant, end)
				if err == nil {
					var v string
					v, err = instantValues(promURL, expr, end)
					results = append(results, queryResult{p.Title, where, v})
				}
				switch {
				case err != nil:
					problems = append(problems, where+": "+err.Error())
				case n > 0:
				case mayEmpty(p.Title) && strings.Contains(p.Description, mayBeEmpty):
					t.Logf("%s: no series, allowed (%s)", where, p.Description[strings.Index(p.Description, mayBeEmpty):])
				default:
					problems = append(problems, where+": no series (variables "+vars.String()+")")
				}
			}
		}
	}
	return results, problems
}

// instantValues are expr's series and values at end, as one string.
func instantValues(promURL, expr string, end time.Time) (string, error) {
	var res struct {
		Result []struct {
			Metric map[string]string
			Value  [2]any
		}
	}
	if err := promAPI(promURL, "/api/v1/query", url.Values{"query": {expr}, "time": {unix(end)}}, &res); err != nil {
		return "", err
	}
	var out []string
	for _, r := range res.Result {
		out = append(out, fmt.Sprint(r.Metric, r.Value[1]))
	}
	sort.Strings(out)
	return strings.Join(out, "\n"), nil
}

// resolved holds the variables of a dashboard as Grafana sets them.
type resolved struct {
	vars   map[string]grafanaVariable
	values map[string]string // "$__all" for All
	order  []string
}

func (r *resolved) String() string {
	var s []string
	for _, n := range r.order {
		v := r.values[n]
		if v == "$__all" {
			v = "All"
		}
		s = append(s, n+"="+v)
	}
	return strings.Join(s, " ")
}

// varRef is a variable in a query as Grafana finds it: $name, ${name},
// ${name:format}, [[name]].
var varRef = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]`)

// interpolate replaces the variables of a Prometheus query as Grafana's
// Prometheus data source does: a single-valued variable as it is, one
// that offers several values (multi, All) escaped for a regular
// expression, All as the variable's allValue; the range variables as for
// the dashboard's default range.
func (r *resolved) interpolate(expr string) string {
	return varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		switch name {
		case "__rate_interval":
			return rateInterval
		case "__interval":
			return strconv.Itoa(int(dashStep.Seconds())) + "s"
		case "__range":
			return strconv.Itoa(int(dashRange.Seconds())) + "s"
		}
		v, ok := r.values[name]
		if !ok {
			return ref
		}
		def := r.vars[name]
		switch {
		case v == "$__all":
			return def.AllValue
		case !def.Multi && !def.IncludeAll:
			return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)
		default:
			return regexpSpecial.ReplaceAllString(v, `\\$0`)
		}
	})
}

// regexpSpecial are the characters Grafana escapes in the values of a
// multi-value variable (prometheusSpecialRegexEscape), with a backslash
// that the PromQL string turns into the regular expression's.
var regexpSpecial = regexp.MustCompile(`[\\^$*+?.()|{}\[\]]`)

// resolveVariables sets each variable in order as Grafana does when a
// dashboard opens: the first of its values, or All where it offers All.
func resolveVariables(promURL string, d grafanaDashboard, end time.Time) (*resolved, []string) {
	r := &resolved{vars: map[string]grafanaVariable{}, values: map[string]string{}}
	var errs []string
	for _, v := range d.Templating.List {
		r.vars[v.Name] = v
		r.order = append(r.order, v.Name)
		switch v.Type {
		case "datasource":
			r.values[v.Name] = "prometheus"
			continue
		case "query":
		default:
			errs = append(errs, fmt.Sprintf("variable %s: type %s not resolved by this test", v.Name, v.Type))
			continue
		}
		query, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			query, _ = m["query"].(string)
		}
		opts, err := variableValues(promURL, r.interpolate(query), end)
		if err == nil && v.Regex != "" {
			opts, err = applyRegex(opts, v.Regex)
		}
		if err == nil {
			err = sortValues(opts, v.Sort)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("variable %s: %v", v.Name, err))
		case v.IncludeAll:
			r.values[v.Name] = "$__all"
		case len(opts) == 0:
			errs = append(errs, fmt.Sprintf("variable %s: no value (query %s)", v.Name, r.interpolate(query)))
		default:
			r.values[v.Name] = opts[0]
		}
	}
	return r, errs
}

var (
	labelValuesCall = regexp.MustCompile(`^\s*label_values\((?:(.*),\s*)?(\w+)\)\s*$`)
	queryResultCall = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
)

// variableValues runs a variable's query as Grafana's Prometheus data
// source does: label_values through the label values API over the
// dashboard's range, query_result as an instant query at its end, each
// series written as `name{label="value",...} value timestamp-ms`.
func variableValues(promURL, query string, end time.Time) ([]string, error) {
	if m := labelValuesCall.FindStringSubmatch(query); m != nil {
		params := url.Values{"start": {unix(end.Add(-dashRange))}, "end": {unix(end)}}
		if m[1] != "" {
			params.Set("match[]", m[1])
		}
		var values []string
		if err := promAPI(promURL, "/api/v1/label/"+m[2]+"/values", params, &values); err != nil {
			return nil, err
		}
		return values, nil
	}
	if m := queryResultCall.FindStringSubmatch(query); m != nil {
		var res struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
		if err := promAPI(promURL, "/api/v1/query", url.Values{"query": {m[1]}, "time": {unix(end)}}, &res); err != nil {
			return nil, err
		}
		var out []string
		for _, s := range res.Result {
			text := s.Metric["__name__"]
			var labels []string
			for k, v := range s.Metric {
				if k != "__name__" {
					labels = append(labels, k+`="`+v+`"`)
				}
			}
			sort.Strings(labels) // Prometheus' JSON lists them by name
			ts, _ := s.Value[0].(float64)
			text += "{" + strings.Join(labels, ",") + "} " + fmt.Sprint(s.Value[1]) + " " + strconv.FormatInt(int64(ts*1000), 10)
			out = append(out, text)
		}
		return out, nil
	}
	return nil, fmt.Errorf("query %q: neither label_values nor query_result", query)
}

// applyRegex keeps what a variable's regex (/.../) captures of each value,
// once: Grafana drops the values it does not match.
func applyRegex(values []string, regex string) ([]string, error) {
	body := strings.TrimPrefix(regex, "/")
	i := strings.LastIndex(body, "/")
	if i < 0 {
		return nil, fmt.Errorf("regex %s: expected /.../", regex)
	}
	flags := ""
	if strings.Contains(body[i+1:], "i") {
		flags = "(?i)"
	}
	re, err := regexp.Compile(flags + body[:i])
	if err != nil {
		return nil, fmt.Errorf("regex %s: %v", regex, err)
	}
	var out []string
	seen := map[string]bool{}
	for _, v := range values {
		m := re.FindStringSubmatch(v)
		if m == nil {
			continue
		}
		if len(m) > 1 {
			v = m[1]
		} else {
			v = m[0]
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// sortValues sorts as the variable's sort says (Grafana's
// sortVariableValues): 0 as the query gave them.
func sortValues(v []string, order int) error {
	num := func(s string) int {
		m := regexp.MustCompile(`(\d+)`).FindString(s)
		if m == "" {
			return -1
		}
		n, _ := strconv.Atoi(m)
		return n
	}
	switch order {
	case 0:
	case 1:
		sort.SliceStable(v, func(i, j int) bool { return v[i] < v[j] })
	case 2:
		sort.SliceStable(v, func(i, j int) bool { return v[i] > v[j] })
	case 3:
		sort.SliceStable(v, func(i, j int) bool { return num(v[i]) < num(v[j]) })
	case 4:
		sort.SliceStable(v, func(i, j int) bool { return num(v[i]) > num(v[j]) })
	case 5:
		sort.SliceStable(v, func(i, j int) bool { return strings.ToLower(v[i]) < strings.ToLower(v[j]) })
	case 6:
		sort.SliceStable(v, func(i, j int) bool { return strings.ToLower(v[i]) > strings.ToLower(v[j]) })
	default:
		return fmt.Errorf("sort %d not resolved by this test", order)
	}
	return nil
}

// countSeries runs a panel query as Grafana does, instant at the end of
// the range or over the range, and counts the series.
func countSeries(promURL, expr string, instant bool, end time.Time) (int, error) {
	var res struct{ Result []json.RawMessage }
	var err error
	if instant {
		err = promAPI(promURL, "/api/v1/query", url.Values{"query": {expr}, "time": {unix(end)}}, &res)
	} else {
		err = promAPI(promURL, "/api/v1/query_range", url.Values{"query": {expr}, "start": {unix(end.Add(-dashRange))}, "end": {unix(end)},
			"step": {strconv.Itoa(int(dashStep.Seconds()))}}, &res)
	}
	return len(res.Result), err
}

// promAPI calls Prometheus' HTTP API and decodes its data, or returns the
// error it gives.
func promAPI(promURL, path string, params url.Values, data any) error {
	resp, err := httpClient.Get(promURL + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: %s: %v", path, resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// waitEvaluated waits until Prometheus has scraped the exporter a few
// times and evaluated every rule group twice since the first scrape, so
// that the recording rules and rate() have what they need.
func waitEvaluated(t *testing.T, p *promServer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var scrapes struct {
			Result []struct{ Value [2]any }
		}
		err := promAPI(p.url, "/api/v1/query", url.Values{"query": {`min(count_over_time(up[1m]))`}}, &scrapes)
		n := 0.0
		if err == nil && len(scrapes.Result) == 1 {
			n, _ = strconv.ParseFloat(fmt.Sprint(scrapes.Result[0].Value[1]), 64)
		}
		var rules struct {
			Groups []struct {
				Name           string
				LastEvaluation time.Time `json:"lastEvaluation"`
			}
		}
		if err == nil {
			err = promAPI(p.url, "/api/v1/rules", nil, &rules)
		}
		// at the default 2 s, the first scrape was 2n s ago: two
		// evaluations after it have happened once the last is within
		// the scrapes but after the first
		evaluated := err == nil && len(rules.Groups) > 0 && n >= 4
		for _, g := range rules.Groups {
			if time.Since(g.LastEvaluation) > 3*time.Second {
				evaluated = false
			}
		}
		if evaluated {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: not 4 scrapes and the rules evaluated since within a minute (%v, %v scrapes, %+v)", err, n, rules.Groups)
		}
		time.Sleep(time.Second)
	}
}
