package collector

import (
	"net/http"
	"testing"
	"time"
)

// TestServerTimeouts: a client cannot hold a connection for ever, idle or
// sending its headers slowly.
func TestServerTimeouts(t *testing.T) {
	s := newServer(http.NewServeMux())
	if s.IdleTimeout <= 0 || s.IdleTimeout > 10*time.Minute || s.ReadHeaderTimeout <= 0 {
		t.Errorf("IdleTimeout %v, ReadHeaderTimeout %v: expected both set", s.IdleTimeout, s.ReadHeaderTimeout)
	}
}
