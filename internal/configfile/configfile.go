// Package configfile is --config.file: a JSON object of flag values keyed
// by flag name, as the lowest-precedence source of a kong command line.
package configfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/regular"
)

// maxConfigFile bounds what --config.file reads: a file of flag values is
// a few kilobytes, and a FIFO or device given by mistake must not be read
// for ever.
const maxConfigFile = 1 << 20

// File is --config.file: a JSON object keyed by flag names as the
// docs spell them ("web.listen-address"); kong's own JSON resolver looks
// keys up with '-' turned into '_', so that spelling was silently
// ignored. Every key must name a flag of some command, and every value
// must parse as that flag's type: both are errors naming the file.
type File string

// BeforeResolve loads the file and adds it as the lowest-precedence
// source, under flags and environment variables. The flag's value is
// read from ctx: kong applies parsed values to their fields only after
// resolving.
func (File) BeforeResolve(k *kong.Kong, ctx *kong.Context, trace *kong.Path) error {
	path, _ := ctx.FlagValue(trace.Flag).(File)
	if path == "" {
		return nil
	}
	r, err := loadConfigFile(string(path), k.Model, ctx.Flags())
	if err != nil {
		return err
	}
	ctx.AddResolver(r)
	return nil
}

type configResolver struct {
	path   string
	values map[string]any
}

// loadConfigFile reads path: every key must name a flag of some command,
// so that one file can serve several, and each value must suit the flag
// of that name that this command line has (--cluster is a list to serve,
// one name to check).
func loadConfigFile(path string, app *kong.Application, active []*kong.Flag) (*configResolver, error) {
	b, _, err := regular.Read(path, maxConfigFile)
	switch {
	case errors.Is(err, regular.ErrNotRegular):
		return nil, fmt.Errorf("--config.file %s: expected a regular file", path)
	case errors.Is(err, regular.ErrTooLarge):
		return nil, fmt.Errorf("--config.file %s: larger than %d bytes: expected a JSON object of flag values", path, maxConfigFile)
	case err != nil:
		return nil, fmt.Errorf("--config.file: %w", err)
	}
	r := &configResolver{path: path}
	if err := json.Unmarshal(b, &r.values); err != nil {
		return nil, fmt.Errorf("--config.file %s: expected a JSON object of flag values (\"refresh-interval\": \"60s\"): %w", path, err)
	}
	known := map[string]bool{}
	kong.Visit(app, func(n kong.Visitable, next kong.Next) error {
		if f, ok := n.(*kong.Flag); ok {
			known[f.Name] = true
			for _, a := range f.Aliases {
				known[a] = true
			}
		}
		return next(nil)
	})
	for _, k := range slices.Sorted(maps.Keys(r.values)) {
		if !known[configName(k)] || k == "config.file" || k == "help" || k == "version" {
			return nil, fmt.Errorf("--config.file %s: unknown key %q: expected a flag name without its dashes, such as \"web.listen-address\" (docs/configuration.md)", path, k)
		}
	}
	for _, f := range active {
		if v, ok := r.lookup(f); ok {
			if err := checkValue(f, v); err != nil {
				return nil, fmt.Errorf("--config.file %s: key %q: %w", path, f.Name, err)
			}
		}
	}
	return r, nil
}

// configName is the flag a key names: kong's own JSON loader took
// '_' for '-', and files written for it keep working.
func configName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// lookup finds f's value by its name, then by an earlier release's
// name (its aliases), each also spelled with '_' for '-'.
func (r *configResolver) lookup(f *kong.Flag) (any, bool) {
	for _, name := range append([]string{f.Name}, f.Aliases...) {
		for _, key := range []string{name, strings.ReplaceAll(name, "-", "_")} {
			if v, ok := r.values[key]; ok {
				return v, true
			}
		}
	}
	return nil, false
}

// checkValue decodes v as f would, into a scratch value, so that a bad
// value is found while the file and key are known; kong decodes it again
// into the flag. Enums and whole numbers are checked here too: kong would
// take 5.5 for an integer flag as 5.
func checkValue(f *kong.Flag, v any) error {
	scratch := reflect.New(f.Target.Type()).Elem()
	// the mapper itself, not f.Parse, which would mark the flag set
	if err := f.Mapper.Decode(&kong.DecodeContext{Value: f.Value, Scan: kong.Scan().PushTyped(v, kong.FlagValueToken)}, scratch); err != nil {
		return err
	}
	if n, ok := v.(float64); ok && n != math.Trunc(n) && scratch.CanInt() {
		return fmt.Errorf("%v: expected a whole number", n)
	}
	if f.Enum != "" {
		if s := fmt.Sprint(scratch.Interface()); !slices.Contains(f.EnumSlice(), s) {
			return fmt.Errorf("%q: expected one of %s", s, f.Enum)
		}
	}
	return nil
}

func (r *configResolver) Validate(*kong.Application) error { return nil }

// Resolve gives the file's value unless the flag's environment variable
// is set: kong applies resolvers over the environment.
func (r *configResolver) Resolve(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
	for _, env := range f.Envs {
		if _, set := os.LookupEnv(env); set {
			return nil, nil
		}
	}
	v, _ := r.lookup(f)
	return v, nil
}
