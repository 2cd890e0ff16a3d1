// Package slurmconf reads the parts of slurm.conf that decide fairshare and
// job priority. Syntax follows src/common/parse_config.c of SchedMD/slurm:
// case-insensitive keys, '#' comments (a '\#' is literal), a trailing '\'
// joins the next line, several Key=Value pairs on one line, double-quoted
// values, and "Include PATH" (relative to the including file, glob
// patterns allowed).
package slurmconf

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// maxIncludeDepth bounds Include chains (Slurm's parse_config allows 10
// levels of nesting too).
const maxIncludeDepth = 10

// Pos is where a value was read.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Setting is one Key=Value.
type Setting struct {
	Key   string // as written
	Value string
	Pos   Pos
}

// Line is one configuration line that starts with Key=Value: a NodeName or
// PartitionName line, or a plain setting.
type Line []Setting

// Get returns the value of key on the line (case-insensitive).
func (l Line) Get(key string) (Setting, bool) {
	for _, s := range l {
		if strings.EqualFold(s.Key, key) {
			return s, true
		}
	}
	return Setting{}, false
}

// Raw is a parsed file: every line in order, Includes expanded.
type Raw struct {
	Lines []Line
	// ModTime is the latest modification time of the files read.
	ModTime time.Time
}

// ReadFile parses path and its Includes from fsys (os.DirFS("/") for the
// real file system, with path made relative to it).
func ReadFile(fsys fs.FS, path string) (*Raw, error) {
	r := &Raw{}
	if err := r.read(fsys, path, 0); err != nil {
		return nil, err
	}
	return r, nil
}

// Parse parses one file's text; Include lines are an error.
func Parse(name string, text io.Reader) (*Raw, error) {
	r := &Raw{}
	if err := r.parse(nil, name, text, 0); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Raw) read(fsys fs.FS, path string, depth int) error {
	f, err := fsys.Open(path)
	if err != nil {
		return fmt.Errorf("slurm.conf: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.ModTime().After(r.ModTime) {
		r.ModTime = st.ModTime()
	}
	return r.parse(fsys, path, f, depth)
}

func (r *Raw) parse(fsys fs.FS, name string, text io.Reader, depth int) error {
	sc := bufio.NewScanner(text)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var pending strings.Builder
	start, no := 0, 0
	for sc.Scan() {
		no++
		line := stripComment(sc.Text())
		if pending.Len() == 0 {
			start = no
		}
		if strings.HasSuffix(line, `\`) {
			// parse_config.c drops the backslash and newline and appends
			// the next line as it is.
			pending.WriteString(strings.TrimSuffix(line, `\`))
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()
		if err := r.line(fsys, name, start, full, depth); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", name, no+1, err)
	}
	if pending.Len() > 0 {
		return r.line(fsys, name, start, pending.String(), depth)
	}
	return nil
}

// stripComment removes a '#' comment; '\#' stands for '#'.
func stripComment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '#':
			b.WriteByte('#')
			i++
		case s[i] == '#':
			return strings.TrimRight(b.String(), " \t")
		default:
			b.WriteByte(s[i])
		}
	}
	return strings.TrimRight(b.String(), " \t\r")
}

func (r *Raw) line(fsys fs.FS, name string, no int, text string, depth int) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	pos := Pos{name, no}
	if word, rest, ok := strings.Cut(text, " "); ok && strings.EqualFold(word, "include") && !strings.Contains(word, "=") {
		return r.include(fsys, pos, strings.TrimSpace(rest), depth)
	}
	var l Line
	for rest := text; rest != ""; {
		s, next, err := keyValue(rest)
		if err != nil {
			return fmt.Errorf("%s: %w", pos, err)
		}
		s.Pos = pos
		l = append(l, s)
		rest = next
	}
	r.Lines = append(r.Lines, l)
	return nil
}

func (r *Raw) include(fsys fs.FS, pos Pos, pattern string, depth int) error {
	if fsys == nil {
		return fmt.Errorf("%s: Include %q: includes need a file system", pos, pattern)
	}
	if depth >= maxIncludeDepth {
		return fmt.Errorf("%s: Include %q: more than %d levels of Include", pos, pattern, maxIncludeDepth)
	}
	pattern = strings.Trim(pattern, `"`)
	if !filepath.IsAbs(pattern) && !strings.HasPrefix(pattern, "/") {
		pattern = filepath.Join(filepath.Dir(pos.File), pattern)
	}
	pattern = strings.TrimPrefix(pattern, "/")
	matches, err := fs.Glob(fsys, pattern)
	if err != nil {
		return fmt.Errorf("%s: Include %q: %w", pos, pattern, err)
	}
	if len(matches) == 0 {
		return fmt.Errorf("%s: Include /%s: no such file", pos, pattern)
	}
	for _, m := range matches {
		if err := r.read(fsys, m, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// keyValue reads one Key=Value (spaces around '=' allowed, value optionally
// double-quoted) and returns the rest of the line.
func keyValue(s string) (Setting, string, error) {
	s = strings.TrimLeft(s, " \t")
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return Setting{}, "", fmt.Errorf("%q: expected Key=Value", firstWord(s))
	}
	key := strings.TrimRight(s[:eq], " \t")
	if !validKey(key) {
		return Setting{}, "", fmt.Errorf("%q: expected a key of letters, digits, '_' or '.' before '='", key)
	}
	v := strings.TrimLeft(s[eq+1:], " \t")
	if strings.HasPrefix(v, `"`) {
		end := strings.IndexByte(v[1:], '"')
		if end < 0 {
			return Setting{}, "", fmt.Errorf("key %s: unterminated quoted value", key)
		}
		return Setting{Key: key, Value: v[1 : 1+end]}, strings.TrimLeft(v[2+end:], " \t"), nil
	}
	value, rest, _ := strings.Cut(v, " ")
	if i := strings.IndexByte(value, '\t'); i >= 0 {
		value, rest = value[:i], value[i+1:]+" "+rest
	}
	return Setting{Key: key, Value: value}, strings.TrimSpace(rest), nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}
