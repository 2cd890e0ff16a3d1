package fairshare

import "time"

// Seconds is t on the time axis of Passes and the usage rebuild: Unix
// seconds with their fraction (a read's moment falls between whole
// seconds; the passes' own moments are whole).
func Seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
