package mariadbtest

import "testing"

// TestStartTakenPort: a server started on a port another server holds (two
// parallel tests picked the same free port) is not taken for started,
// though the other answers there.
func TestStartTakenPort(t *testing.T) {
	a := Start(t, "")
	b := Start(t, "")
	b.Stop()
	if b.start(a.Port) {
		t.Fatalf("started on port %d, which the other server holds", a.Port)
	}
	if !b.start(freePort(t)) {
		t.Fatal("not started on a free port")
	}
	b.MustSQL("CREATE DATABASE only_b")
	if out := a.MustSQL("SHOW DATABASES LIKE 'only_b'"); out != "" {
		t.Errorf("the other server has b's database: %q", out)
	}
}
