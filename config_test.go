package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/cli"
)

// configValue is a value for f other than its default, as JSON gives it,
// and what the flag's field must hold after parsing it.
func configValue(t *testing.T, f *kong.Flag, file string) (raw any, want any) {
	switch v := f.Target.Interface().(type) {
	case time.Duration:
		return "7s", 7 * time.Second
	case bool:
		return !v, !v
	case int:
		return 7.0, 7
	case uint32:
		return 7.0, uint32(7)
	case float64:
		return 0.25, 0.25
	case cli.ForecastThreshold:
		return 0.25, cli.ForecastThreshold{On: true, Threshold: 0.25}
	case []time.Duration:
		return "7s,8m", []time.Duration{7 * time.Second, 8 * time.Minute}
	case []string:
		return []any{"127.0.0.1:1", "127.0.0.1:2"}, []string{"127.0.0.1:1", "127.0.0.1:2"}
	case string:
		if f.Enum != "" {
			e := f.EnumSlice()
			return e[len(e)-1], e[len(e)-1]
		}
		if f.Tag.Type == "path" || f.Tag.Type == "existingfile" {
			return file, file
		}
		return "x1", "x1"
	}
	t.Fatalf("--%s: no test value for %T", f.Name, f.Target.Interface())
	return nil, nil
}

// TestConfigFileEveryFlag: every flag of docs/configuration.md (the
// command line's own model) is set from --config.file, spelled as the
// docs spell it.
func TestConfigFileEveryFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "some.file")
	os.WriteFile(file, nil, 0o600)
	var model commandLine
	p, err := newParser(&model)
	if err != nil {
		t.Fatal(err)
	}
	nodes := append([]*kong.Node{p.Model.Node}, p.Model.Children...)
	n := 0
	for _, node := range nodes {
		for _, f := range node.Flags {
			if f.Name == "help" || f.Name == "config.file" || f.Name == "version" {
				continue
			}
			t.Run(f.Name, func(t *testing.T) {
				raw, want := configValue(t, f, file)
				conf := filepath.Join(dir, f.Name+".json")
				b, _ := json.Marshal(map[string]any{f.Name: raw})
				os.WriteFile(conf, b, 0o600)
				var c commandLine
				p, err := newParser(&c, kong.Exit(func(int) {}), kong.Writers(&bytes.Buffer{}, &bytes.Buffer{}))
				if err != nil {
					t.Fatal(err)
				}
				cmd := []string{"serve"}
				if node.Parent != nil {
					cmd = []string{node.Name}
				}
				_, err = p.Parse(append(cmd, "--config.file", conf))
				// a value may be refused by the command's own checks:
				// only the file's reading is under test
				if err != nil && strings.Contains(err.Error(), "config.file") {
					t.Fatalf("%s: %v", b, err)
				}
				var got any
				for _, n := range append([]*kong.Node{p.Model.Node}, p.Model.Children...) {
					for _, g := range n.Flags {
						if n.Name == node.Name && g.Name == f.Name {
							got = g.Target.Interface()
						}
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: --%s = %#v, want %#v (parse: %v)", b, f.Name, got, want, err)
				}
			})
			n++
		}
	}
	if n < 40 {
		t.Errorf("%d flags tried: expected every flag of every command", n)
	}
}

// TestConfigFilePrecedence: a flag overrides the environment, which
// overrides the file.
func TestConfigFilePrecedence(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(conf, []byte(`{"refresh-interval": "5s", "reported.timeout": "6s", "db.timeout": "8s"}`), 0o600)
	t.Setenv("SLURMDBD_EXPORTER_REPORTED_TIMEOUT", "7s")
	t.Setenv("SLURMDBD_EXPORTER_DB_TIMEOUT", "7s")
	var c commandLine
	p, err := newParser(&c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"serve", "--demo", "--config.file", conf, "--db.timeout", "9s"}); err != nil {
		t.Fatal(err)
	}
	s := c.Serve
	if s.RefreshInterval != 5*time.Second || s.ReportedTimeout != 7*time.Second || s.DBTimeout != 9*time.Second {
		t.Errorf("refresh-interval %v (file: 5s), reported.timeout %v (file 6s, env 7s), db.timeout %v (file 8s, env 7s, flag 9s)",
			s.RefreshInterval, s.ReportedTimeout, s.DBTimeout)
	}
}

// TestConfigFileErrors: what the file gets wrong is an error (exit 2)
// naming the file and the key; kong's own loader ignored unknown keys
// and the documented spelling.
func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"unknown key", `{"refresh-interval": "5s", "listen": ":1"}`, []string{`unknown key "listen"`}},
		{"bad duration", `{"refresh-interval": "banana"}`, []string{`key "refresh-interval"`, "banana"}},
		{"bad enum", `{"log.level": "loud"}`, []string{`key "log.level"`, "loud"}},
		{"fraction for a count", `{"collector.max-associations": 5.5}`, []string{`key "collector.max-associations"`, "whole number"}},
		{"not JSON", `{"refresh-interval": `, []string{"expected a JSON object"}},
		{"not an object", `["refresh-interval"]`, []string{"expected a JSON object"}},
		{"a FIFO", "", []string{fifo, "regular file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := fifo
			if tc.content != "" {
				path = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
				os.WriteFile(path, []byte(tc.content), 0o600)
			}
			var stdout, stderr bytes.Buffer
			done := make(chan int)
			go func() {
				done <- run([]string{"--config.file", path, "serve", "--demo", "--web.listen-address", "127.0.0.1:0"}, &stdout, &stderr)
			}()
			select {
			case code := <-done:
				if code != exitError {
					t.Errorf("exit %d, want %d", code, exitError)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still running after 10 s")
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q: want %q", stderr.String(), w)
				}
			}
		})
	}
}

// TestOldFlagNames: the names check used before the flags were shared
// still work, on the command line and in a file, for one more release
// (docs/configuration.md).
func TestOldFlagNames(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(conf, []byte(`{"factor-tolerance": 0.03}`), 0o600)
	var c commandLine
	p, err := newParser(&c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Parse([]string{"check", "--sshare-file", conf, "--config.file", conf,
		"--sshare-timeout", "7s", "--usage-tolerance", "0.02", "--tolerance", "0.5"})
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Check
	if ch.ReportedTimeout != 7*time.Second || ch.UsageTolerance != 0.02 || ch.FactorTolerance != 0.03 || ch.FormulaTolerance != 0.5 {
		t.Errorf("reported.timeout %v, drift.usage-tolerance %v, drift.factor-tolerance %v, drift.formula-tolerance %v: want 7s, 0.02, 0.03 (file), 0.5",
			ch.ReportedTimeout, ch.UsageTolerance, ch.FactorTolerance, ch.FormulaTolerance)
	}
}
