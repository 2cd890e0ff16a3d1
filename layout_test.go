package main

import (
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
)

// commandFiles are each command's files. What they share lives in
// package cli (the flag groups) and flags.go (how they run and exit);
// main.go wires them and is used by none.
var commandFiles = map[string]string{
	"serve.go": "serve", "check.go": "check", "check_db.go": "check", "explain.go": "explain",
}

// TestCommandsUseSharedSetup: a command's file uses no declaration of
// main.go or of another command's file: the setup every command needs
// (DSN, slurm.conf, --at, tolerances: package cli; runEnv and the exit
// codes: flags.go) is shared, so that a change to one command cannot change another
// behind its back, and main.go stays wiring.
func TestCommandsUseSharedSetup(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("main", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || obj.Parent() != pkg.Scope() {
			continue // not a package-level declaration of main
		}
		user := filepath.Base(fset.Position(id.Pos()).Filename)
		owner := filepath.Base(fset.Position(obj.Pos()).Filename)
		if cu, co := commandFiles[user], commandFiles[owner]; cu != "" && co != cu && owner != "flags.go" {
			t.Errorf("%s (%s) uses %s of %s: move it to flags.go", user, cu, id.Name, owner)
		}
	}
}

// TestFlagGroupsValidated: every struct a command embeds is of an
// exported type. kong calls the Validate of embedded flag groups itself
// (Context.Validate, walkEmbedded), but skips unexported fields, and an
// embedded field of an unexported type is one: its Validate would
// silently never run.
func TestFlagGroupsValidated(t *testing.T) {
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.Anonymous || f.Type.Kind() != reflect.Struct {
				continue
			}
			if !f.IsExported() {
				t.Errorf("%s embeds %s, an unexported type: kong would not call its Validate", path, f.Type.Name())
			}
			walk(path+"."+f.Name, f.Type)
		}
	}
	root := reflect.TypeFor[commandLine]()
	n := 0
	for i := range root.NumField() {
		f := root.Field(i)
		_, cmd := f.Tag.Lookup("cmd")
		_, embed := f.Tag.Lookup("embed")
		if cmd || embed {
			walk(f.Name, f.Type)
			n++
		}
	}
	if n < 4 {
		t.Errorf("%d commands and groups walked: expected serve, check, explain and the log flags", n)
	}
}

// layers order the project's packages: a package imports only packages
// of a lower layer, so that imports run one way, from the command line
// down to the math. internal/ packages are helpers outside the order:
// they import layer 0 and each other, and anyone imports them; so are
// the top-level ones (package main, cmd/, e2e/, packaging/, dashboards/),
// which nothing imports.
var layers = map[string]int{
	// pure computation and plain data
	"fairshare": 0, "priority": 0,
	"shares": 1, "result": 1, "slurmconf": 1, "slurmstate": 1, "usage": 1,
	// one source each: the database, what Slurm reports, the comparison,
	// the decay passes the reports show
	"slurmdbd": 2, "sshare": 2, "drift": 2, "passes": 2,
	// the pure step from what was read to what is published, and the
	// simulated cluster serve --demo gives the engine as a source
	"build": 3, "sim": 3,
	// the pipeline, the metrics it publishes to through an interface, and
	// a fixed cluster built for tests
	"engine": 4, "collector": 4, "build/buildtest": 4,
	// the commands' own: their answers, serve's schedule, and the flag
	// groups they share
	"explain": 5, "check": 5, "serve": 5, "cli": 5,
}

// denied are imports the layers allow but the design does not: explain
// and check answer from engine's inputs, never from the database or the
// metrics; cli reads flags, it renders nothing.
var denied = map[string][]string{"explain": {"slurmdbd", "collector"}, "check": {"slurmdbd", "collector"}, "cli": {"collector", "explain", "check"}}

// TestImportsGoDown: see layers. A new package must be given a layer.
func TestImportsGoDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSpace(string(mod))
	local := func(p string) (string, bool) {
		if p == prefix {
			return "", true
		}
		rest, ok := strings.CutPrefix(p, prefix+"/")
		return rest, ok
	}
	top := func(p string) bool {
		for _, dir := range []string{"cmd/", "e2e", "packaging", "dashboards/"} {
			if strings.HasPrefix(p, dir) {
				return true
			}
		}
		return p == ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := local(fields[0])
		if !ok || top(pkg) {
			continue
		}
		internal := strings.HasPrefix(pkg, "internal/")
		layer, ranked := layers[pkg]
		if !ranked && !internal {
			t.Errorf("%s has no layer: add it to layers", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := local(imp)
			if !ok {
				continue
			}
			dl, depRanked := layers[dep]
			switch {
			case top(dep):
				t.Errorf("%s imports %s: nothing imports package main, cmd/, e2e/ or packaging/", pkg, dep)
			case strings.HasPrefix(dep, "internal/"):
			case internal && dl > 0:
				t.Errorf("%s imports %s: internal/ helpers import only layer 0 (fairshare, priority) and each other", pkg, dep)
			case !internal && depRanked && dl >= layer:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go down only", pkg, layer, dep, dl)
			case slices.Contains(denied[pkg], dep):
				t.Errorf("%s imports %s: denied (see denied)", pkg, dep)
			}
		}
	}
}

// pure are packages that compute and do no I/O of their own: they must not
// reach a process, the network or a database, even through a package
// they import (a type of sshare's as a parameter brings os/exec and
// net/http with it).
var pure = []string{"./fairshare", "./priority", "./drift", "./passes", "./build", "./shares", "./result", "./usage"}

func TestPurePackagesDoNoIO(t *testing.T) {
	for _, pkg := range pure {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			switch dep {
			case "os/exec", "net", "net/http", "database/sql":
				t.Errorf("%s depends on %s: expected pure computation (no process, network or database)", pkg, dep)
			}
		}
	}
}

// TestGroupsValidateOnEveryCommand: kong calls each group's Validate on
// whichever command embeds it, nested groups (ReportedFlags's timeout)
// included: no command calls them by hand.
func TestGroupsValidateOnEveryCommand(t *testing.T) {
	t.Setenv(cli.DSNEnv, "")
	serve, check, explain := []string{"serve", "--demo"}, []string{"check", "--sshare-file", "layout_test.go"}, []string{"explain", "--demo", "--user", "u"}
	for _, tc := range []struct {
		cmd  []string
		bad  []string
		want string
	}{
		{serve, []string{"--reported.timeout", "0s"}, "--reported.timeout"},
		{check, []string{"--reported.timeout", "0s"}, "--reported.timeout"},
		{explain, []string{"--reported.timeout", "0s"}, "--reported.timeout"},
		{serve, []string{"--db.timeout", "-1s"}, "--db.timeout"},
		{check, []string{"--db.timeout", "-1s"}, "--db.timeout"},
		{explain, []string{"--db.timeout", "-1s"}, "--db.timeout"},
		{serve, []string{"--drift.formula-tolerance", "-1"}, "--drift.formula-tolerance"},
		{check, []string{"--tolerance", "-1"}, "--drift.formula-tolerance"},
		{serve, []string{"--maui.fsinterval", "-1h"}, "--maui.fsinterval"},
		{explain, []string{"--maui.fsinterval", "-1h"}, "--maui.fsinterval"},
		{serve, []string{"--forecast.window", "0s"}, "--forecast.window"},
		{explain, []string{"--forecast.window", "0s"}, "--forecast.window"},
		{serve, []string{"--demo.associations", "1"}, "--demo.associations"},
		{explain, []string{"--demo.associations", "1"}, "--demo.associations"},
		{check, []string{"--cluster", "a", "--cluster", "b"}, "--cluster a,b: expected one cluster"},
		{explain, []string{"--cluster", "a,b"}, "--cluster a,b: expected one cluster"},
	} {
		var c commandLine
		p, err := newParser(&c, kong.Exit(func(int) {}), kong.Writers(io.Discard, io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		args := append(slices.Clone(tc.cmd), tc.bad...)
		if _, err := p.Parse(args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %s", args, err, tc.want)
		}
	}
}

// maxFuncLines is the longest a non-test function may be: a reader holds
// one step in view.
const maxFuncLines = 80

// TestFunctionsShort: no non-test function of the module is longer than
// maxFuncLines, from its func line to its closing brace.
func TestFunctionsShort(t *testing.T) {
	fset := token.NewFileSet()
	for _, path := range productFiles(t) {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines: expected at most %d (split it into named steps)", path, fn.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}

// maxFileLines is the longest a non-test file may be: a file holds one
// idea, named for it (fairshare/ by algorithm), and one idea fits in this.
// Test files may be longer: a table of cases grows with the cases.
const maxFileLines = 500

// TestFilesShort: no non-test file of the module is longer than
// maxFileLines.
func TestFilesShort(t *testing.T) {
	for _, path := range productFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if n > maxFileLines {
			t.Errorf("%s is %d lines: expected at most %d (split it into files of one idea each, named for it)", filepath.ToSlash(path), n, maxFileLines)
		}
	}
}

// productFiles are the module's non-test .go files, but those under
// testdata, hidden directories and modules of their own
// (dashboards/grafana).
func productFiles(t *testing.T) []string {
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
