package main

import (
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/testenv"
)

// TestCheckInput: --sshare-file that is cut short, lists an association
// twice, or is inconsistent is bad input (exit 2) named by file and line,
// not drift; blank lines count in line numbers; a UTF-8 BOM is skipped.
func TestCheckInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return testenv.WriteFile(t, dir, name, text) }
	plain := string(readTestdata(t, "slurm-24.11/sshare-a-l-P.txt"))
	withM := string(readTestdata(t, "slurm-24.11/sshare-a-l-P-m.txt"))
	line := func(text string, n int) string { return strings.SplitAfter(text, "\n")[n-1] }
	short := "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\nroot|||0.000000|10|1.000000|\n root|root|1|1.000000|10|1.000000|0.5"
	rows := make([]string, sshare.MaxRows+1)
	for i := range rows {
		rows[i] = " root|u" + string(rune('a'+i%26)) + "|1|0.5|0|0.000000|0.000000|0.5|inf||cpu=0\n"
	}
	for _, tc := range []struct {
		name, file string
		args       []string
		code       int
		msg        string
	}{
		{"cut in the last field", write("cut.txt", plain[:len(plain)-30]), nil, 2, "cut.txt: sshare line 18: no newline at the end"},
		{"cut mid-number", write("cutnum.txt", short), nil, 2, "cutnum.txt: sshare line 3: no newline at the end"},
		{"user twice", write("dupuser.txt", withM+line(withM, 6)), nil, 2, `dupuser.txt: sshare line 19: account "b", user "u1", partition "" again (first on line 6)`},
		{"account twice", write("dupacct.txt", plain[:strings.Index(plain, "  c|")]+line(plain, 5)+plain[strings.Index(plain, "  c|"):]), nil, 2, `dupacct.txt: sshare line 8: account "b", user "", partition "" again (first on line 5)`},
		{"-p header, -P rows", write("mixed.txt", strings.Replace(plain, "\n", "|\n", 1)), nil, 2, "mixed.txt: sshare line 2: no '|' at the end"},
		{"BOM", write("bom.txt", "\ufeff"+plain), nil, 0, ""},
		{"BOM without header", write("bomn.txt", "\ufeff"+string(readTestdata(t, "slurm-24.11/sshare-a-l-P-n.txt"))), []string{"--algorithm", "fair_tree"}, 0, ""},
		{"error after blank lines", write("blank.txt", line(plain, 1)+"\n\n"+strings.Replace(plain[len(line(plain, 1)):], "|40|", "|x|", 1)), nil, 2, `blank.txt: sshare line 6: RawShares "x"`},
		{"long line after blank lines", write("long.txt", line(plain, 1)+"\n\n"+strings.Repeat("x", 2<<20)+"\n"), nil, 2, "long.txt: sshare line 4: larger than the limit of 1048576 bytes on a line"},
		{"more rows than the limit", write("huge.txt", line(plain, 1)+line(plain, 2)+strings.Join(rows, "")), nil, 2, "huge.txt: sshare line 400002: larger than the limit of 400000 rows"},
		{"binary", write("bin.bin", line(plain, 1)+line(plain, 2)+"\x00\x89PNG\r\n"), nil, 2, "bin.bin: sshare line 3: a NUL byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, append([]string{"check", "--sshare-file", tc.file}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d, stderr %q: want exit %d and %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
}

// TestCheckInputStream: a --sshare-file that never ends (a FIFO fed with
// rows, or with random bytes as /dev/urandom is) ends at once with exit 2
// and the limit it passed, and the heap stays bounded: before the limits,
// check kept the whole input, 12 to 17 times its size.
func TestCheckInputStream(t *testing.T) {
	header := string(readTestdata(t, "slurm-24.11/sshare-a-l-P.txt")[:300])
	header = header[:strings.Index(header, "\n")+1]
	for _, tc := range []struct {
		name string
		args []string
		feed func(w io.Writer) error
		msg  string
	}{
		{"rows", nil, func(w io.Writer) error {
			chunk := []byte(strings.Repeat(" root|u|1|0.5|0|0.000000|0.000000|0.5|inf||cpu=0\n", 1000))
			if _, err := io.WriteString(w, header); err != nil {
				return err
			}
			for {
				if _, err := w.Write(chunk); err != nil {
					return err
				}
			}
		}, "larger than the limit of 400000 rows"},
		{"random bytes", nil, func(w io.Writer) error { _, err := io.Copy(w, rand.Reader); return err }, "fifo: "},
		// a first byte other than '{': random bytes starting with one read as JSON
		{"random bytes, algorithm given", []string{"--algorithm", "fair_tree"}, func(w io.Writer) error {
			_, err := io.Copy(w, io.MultiReader(strings.NewReader("x"), rand.Reader))
			return err
		}, "fifo: sshare line 1: "},
		{"random bytes after '{'", nil, func(w io.Writer) error {
			_, err := io.Copy(w, io.MultiReader(strings.NewReader("{"), rand.Reader))
			return err
		}, "fifo: shares JSON: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			var stop atomic.Bool
			fed := make(chan struct{})
			go func() {
				defer close(fed)
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer f.Close()
				tc.feed(&stopWriter{f, &stop})
			}()
			// the feed ends when check closes the FIFO, or, if check keeps
			// reading, after 10 s or 1 GiB of heap
			go func() { time.Sleep(10 * time.Second); stop.Store(true) }()
			start := time.Now()
			var code int
			var errOut string
			peak := testenv.HeapRise(func() { stop.Store(true) }, func() { code, _, errOut = runCLI(t, append([]string{"check", "--sshare-file", fifo}, tc.args...)...) })
			took := time.Since(start)
			stop.Store(true)
			// a check that never opened the FIFO leaves the feed waiting
			if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			<-fed
			if code != 2 || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d, stderr %q: want exit 2 and %q", code, errOut, tc.msg)
			}
			if took > 5*time.Second {
				t.Errorf("took %v: want it to end at the limit", took)
			}
			if peak > 256<<20 {
				t.Errorf("heap rose %d MB: want at most 256 MB", peak>>20)
			}
			t.Logf("%v, heap +%d MB: %s", took.Round(time.Millisecond), peak>>20, strings.TrimSpace(errOut))
		})
	}
}

// stopWriter fails once stop is set.
type stopWriter struct {
	w    io.Writer
	stop *atomic.Bool
}

func (s *stopWriter) Write(p []byte) (int, error) {
	if s.stop.Load() {
		return 0, io.ErrClosedPipe
	}
	return s.w.Write(p)
}
