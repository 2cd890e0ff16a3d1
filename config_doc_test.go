package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md (TestConfigurationDoc)")

// configurationDoc renders docs/configuration.md from the command line's
// own model, so that the table cannot miss a flag or show a stale default.
func configurationDoc(t *testing.T) []byte {
	t.Helper()
	var c commandLine
	p, err := newParser(&c)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("# Configuration\n\n" +
		"<!-- Generated from the command line by config_doc_test.go: go test -run TestConfigurationDoc -update . -->\n\n" +
		"Every flag is also an environment variable (shown under it) and a key of the\n" +
		"JSON file given to `--config.file`; a flag overrides the environment, which\n" +
		"overrides the file. The database DSN is read from `--dsn-file` or\n" +
		"`$SLURMDBD_EXPORTER_DSN`, never from the command line.\n\n" +
		"One name per concept across commands. The names check used before\n" +
		"are kept as hidden aliases, on the command line and in the file, until\n" +
		"the next release: `--sshare-timeout` (now `--reported.timeout`),\n" +
		"`--usage-tolerance`, `--factor-tolerance` and `--tolerance` (now\n" +
		"`--drift.usage-tolerance`, `--drift.factor-tolerance`,\n" +
		"`--drift.formula-tolerance`); their environment variables are the new\n" +
		"names'.\n")
	table := func(title string, flags []*kong.Flag) {
		fmt.Fprintf(&b, "\n## %s\n\n| flag | default | meaning |\n|---|---|---|\n", title)
		for _, f := range flags {
			if f.Hidden || f.Name == "help" {
				continue
			}
			name := "--" + f.Name
			if f.Negated {
				name = "--[no-]" + f.Name
			}
			def := ""
			if f.HasDefault {
				def = "`" + f.Default + "`"
			}
			help := strings.ReplaceAll(f.Help, "|", `\|`)
			fmt.Fprintf(&b, "| `%s`<br>`$%s` | %s | %s |\n", name, strings.Join(f.Envs, "`, `$"), def, help)
		}
	}
	table("Every command", p.Model.Flags)
	for _, n := range p.Model.Children {
		table("`"+n.Name+"`: "+n.Help, n.Flags)
	}
	return b.Bytes()
}

// TestConfigurationDoc: docs/configuration.md is what the command line says.
func TestConfigurationDoc(t *testing.T) {
	const path = "docs/configuration.md"
	doc := configurationDoc(t)
	if *update {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(have, doc) {
		t.Errorf("%s is stale: go test -run TestConfigurationDoc -update .", path)
	}
}
