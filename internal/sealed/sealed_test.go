package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var kind = Kind{Magic: "test file\n", Format: 2, What: "test file"}

func sealedBytes(t *testing.T, k Kind, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := k.Seal(&b, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestOpenGivesTheSealedBody(t *testing.T) {
	got, err := kind.Open(bytes.NewReader(sealedBytes(t, kind, `{"a":1}`)), 1<<10)
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Open = %q, %v; want the body", got, err)
	}
}

// Every change to a sealed file that still parses is refused, each with
// its reason.
func TestOpenRefusesWhatWasNotWritten(t *testing.T) {
	good := sealedBytes(t, kind, `{"pass":"2026-01-01T00:00:30Z"}`)
	edited := bytes.Replace(bytes.Clone(good), []byte("00:30"), []byte("01:00"), 1)
	for _, c := range []struct {
		name, data, want string
		unsealed         bool
	}{
		{"edited body", string(edited), "changed since it was written", false},
		{"plain body", `{"pass":"2026-01-01T00:00:30Z"}`, "not a test file", true},
		{"other format", string(sealedBytes(t, Kind{Magic: kind.Magic, Format: 1, What: kind.What}, "x")), "of format 1", false},
		{"truncated", string(good[:len(good)-1]), "truncated", false},
		{"trailing bytes", string(good) + "\n", "followed by more bytes", false},
		{"over the limit", string(sealedBytes(t, kind, strings.Repeat("x", 2<<10))), "expected at most", false},
	} {
		_, err := kind.Open(strings.NewReader(c.data), 1<<10)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrUnsealed) != c.unsealed {
			t.Errorf("%s: Open error %v; want one saying %q (ErrUnsealed %v)", c.name, err, c.want, c.unsealed)
		}
	}
}
