package build

import "github.com/slurmdbd-exporter/slurmdbd_exporter/drift"

// MemoCompare is memoCompare, for the benchmarks of the comparison alone.
var MemoCompare = memoCompare

// Comparison is the comparison m holds (nil: none yet).
func (m *ReportMemo) Comparison() *drift.Comparison { return m.rc }
