package testenv

import (
	"runtime"
	"sync/atomic"
	"time"
)

// HeapRise runs f and returns how far the heap (HeapInuse) rose above
// where it was, sampled every 5 ms. Past 1 GiB it calls abort (if not
// nil) once, so that a flood that is not bounded fails the test instead
// of the machine.
func HeapRise(abort, f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
			if peak.Load() > 1<<30 && abort != nil {
				abort()
				abort = nil
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak.Load()
}
