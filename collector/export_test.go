package collector

import "time"

// SetNow fixes the moment a scrape renders the ages for (tests).
func SetNow(c *Collector, now func() time.Time) { c.now = now }

// OwnRegistry is what Serve gathers beside the snapshot (tests).
var OwnRegistry = ownRegistry
