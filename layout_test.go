package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// commandFiles are each command's files; what they share lives in
// main.go, flags.go and config.go.
var commandFiles = map[string]string{
	"serve.go": "serve", "check.go": "check", "check_db.go": "check", "explain.go": "explain", "explain_job.go": "explain",
}

// TestCommandsUseSharedSetup: no command's file uses a declaration of
// another command's file: the setup every command needs (DSN, slurm.conf,
// --at, tolerances) lives in flags.go, so that a change to one command
// cannot change another behind its back.
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
		if cu, co := commandFiles[user], commandFiles[owner]; cu != "" && co != "" && cu != co {
			t.Errorf("%s (%s) uses %s of %s (%s): move it to flags.go", user, cu, id.Name, owner, co)
		}
	}
}

// pure are packages that compute and do no I/O of their own: they must not
// reach a process, the network or a database, even through a package
// they import (drift took *sshare.Output once, and with it os/exec and
// net/http).
var pure = []string{"./fairshare", "./priority", "./drift", "./shares", "./result", "./usage"}

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
