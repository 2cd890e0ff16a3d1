package usage

import (
	"strings"
	"testing"
)

func TestTRESCount(t *testing.T) {
	for _, tc := range []struct {
		s    string
		id   int
		n    uint64
		ok   bool
		fail bool
	}{
		{"1=64,3=18446744073709551614,4=1,5=64", 5, 64, true, false},
		{"1=4,2=16000,1001=2", 1001, 2, true, false},
		{"1=4", 5, 0, false, false},
		{"", 5, 0, false, false},
		{"1=4,junk", 5, 0, false, true},
	} {
		n, ok, err := TRESCount(tc.s, tc.id)
		if n != tc.n || ok != tc.ok || (err != nil) != tc.fail {
			t.Errorf("TRESCount(%q, %d) = %d, %v, %v", tc.s, tc.id, n, ok, err)
		}
	}
}

func FuzzTRESCount(f *testing.F) {
	for _, s := range []string{"1=64,3=18446744073709551614,4=1,5=64", "1=4,2=16000,1001=2", "", ",,", "5=", "=5", "5=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok, err := TRESCount(s, TRESBilling)
		if err != nil && (ok || n != 0) {
			t.Fatalf("%q: error %v with a count %d/%v", s, err, n, ok)
		}
		if err == nil && ok && !strings.Contains(s, "5=") {
			t.Fatalf("%q: billing found where there is none", s)
		}
	})
}
