// Package usage rebuilds slurmctld's decayed usage (usage_raw, per TRES)
// from what slurmdbd recorded: rolled-up rows spread over their period,
// jobs charged pass by pass, finished jobs' uncharged tails. It is pure
// computation: slurmdbd/ reads the rows, time is a parameter.
package usage

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Static ids of tres_table: cpu=1, mem=2, energy=3, node=4, billing=5.
const (
	// TRESBilling is fairshare's input.
	TRESBilling = 5
	// TRESEnergy is counted in joules, not TRES-seconds: slurmctld leaves
	// it out of decayed usage and so does the exporter.
	TRESEnergy = 3
	// The other static ids slurmdbd gives (as_mysql_tres.c): MAX_TRES
	// bills the largest of these and the GRES.
	TRESCPU  = 1
	TRESMem  = 2
	TRESNode = 4
)

// Key is an association's usage of one TRES.
type Key struct {
	Assoc uint32
	TRES  uint32
}

// Row is one row of a rollup table: alloc_secs of one TRES.
type Row struct {
	Assoc     uint32
	TRES      uint32
	Start     int64 // time_start
	AllocSecs float64
}

// QOSRow is a row of a per-QOS rollup table (24.11+): id_alt is the QOS.
type QOSRow struct {
	Row
	QOS uint32
}

// Period names a rollup table.
type Period string

const (
	Hour  Period = "hour"
	Day   Period = "day"
	Month Period = "month"
)

// periodSeconds is the longest a rollup period can be (a day with a DST
// change, a 31-day month).
var periodSeconds = map[Period]float64{Hour: 3600, Day: 25 * 3600, Month: 31 * 86400}

// Longest is the longest the period can be, in seconds.
func (p Period) Longest() float64 { return periodSeconds[p] }

// maxUnits bounds the units of one TRES an association can hold at once
// (2^40: a trillion CPUs, MB or billing units); alloc_secs beyond it over
// a whole period is a corrupt row, not usage.
const maxUnits = 1 << 40

// MostAllocSecs is the most alloc_secs a row of the period can hold.
func (p Period) MostAllocSecs() float64 { return p.Longest() * maxUnits }

// Start is the start of the hour, local day or local month holding t, as
// slurmdbd rolls them up (a zone may be half an hour off UTC).
func (p Period) Start(t int64, loc *time.Location) int64 {
	if p == Hour {
		_, off := time.Unix(t, 0).In(loc).Zone()
		return t - ((t+int64(off))%3600+3600)%3600
	}
	lt := time.Unix(t, 0).In(loc)
	day := lt.Day()
	if p == Month {
		day = 1
	}
	return time.Date(lt.Year(), lt.Month(), day, 0, 0, 0, 0, loc).Unix()
}

// End is the end of the hour, local day or local month starting at start.
func (p Period) End(start int64, loc *time.Location) int64 {
	switch p {
	case Day:
		return time.Unix(start, 0).In(loc).AddDate(0, 0, 1).Unix()
	case Month:
		return time.Unix(start, 0).In(loc).AddDate(0, 1, 0).Unix()
	}
	return start + 3600
}

// Job is what the rebuild needs of a <cluster>_job_table row.
type Job struct {
	// Inx is job_db_inx: a uint64, since 24.11 generated with the cluster
	// id in its top 12 bits (above 2^63 on 25.11).
	Inx uint64
	// ID is id_job, as squeue and sacct print it; Partition the one the
	// job ran in.
	ID        uint32
	Partition string
	Assoc     uint32
	QOS       uint32
	Start     int64
	End       int64 // 0: running
	TRESAlloc string
	// Billed, where Priced, is the billing slurmctld charges the job per
	// second before QOS UsageFactor (BillingRules.Price): a double, where
	// TRESAlloc holds it truncated. Otherwise the rebuild charges the
	// recorded integer.
	Billed float64
	Priced bool
	// Spread is how far the billing slurmctld charged a second may lie
	// from the one the rebuild charges (BillingRules.Price): one unit above
	// where the rules' billing does not truncate to the one recorded, so
	// the record is charged; where rules newer than the job leave several
	// values that truncate to it, half their range around their middle.
	// Usage.Unpriced bounds it.
	Spread float64
	// SubmitCharge is, for a heterogeneous-job component that slurmctld
	// charged at its submission (26.05+ with limits enforced), that
	// moment, time_submit; 0 otherwise. slurmctld charged it as if it had
	// run from the last pass before to then (submitCharge).
	SubmitCharge int64
}

// Problem is a data problem whose message carries a value that moves from
// refresh to refresh (a decaying usage, the moment computed): Identity
// names the problem itself, so that serve warns of it once, not at every
// refresh while the value moves.
type Problem struct {
	Identity string
	Err      error
}

func (p *Problem) Error() string { return p.Err.Error() }
func (p *Problem) Unwrap() error { return p.Err }

// Finished jobs' uncharged tails depend on the moment of slurmctld's decay
// passes: where it is unknown, so are they. These sums bound that, kept
// like usage per id_assoc under ids no TRES has, so that they decay,
// freeze and are saved with it; the rebuild takes them out of its TRES
// (Usage.TailRisk):
//   - tresTailRate: Σ billing·d^(At−end), what a tail one second longer
//     or shorter moves;
//   - tresTailMost: Σ billing·min(PriorityCalcPeriod, duration)·d^(At−end),
//     the whole tail each job could have;
//   - tresTailLost: Σ billing·(its last interval)·d^(At−end) over the jobs
//     that ended within Passes.LockWait after a pass, which that pass may
//     have found ended and not charged (fairshare.Passes.LockWait).
//
// tresUnpriced sums, the same way, uf·(the job's weight) over the jobs
// charged at their recorded billing whose true one the rules do not give
// (Job.Spread): slurmctld charged up to that much more (Usage.Unpriced).
const (
	tresTailRate = math.MaxUint32 - iota
	tresTailMost
	tresTailLost
	tresUnpriced
)

// KeepsTRES says whether usage of a TRES is kept: billing, or with all
// every TRES but energy (slurmdbd's Cluster.tresCond says the same to the
// server).
func KeepsTRES(id uint32, all bool) bool {
	return id != TRESEnergy && (all || id == TRESBilling || id >= tresUnpriced)
}

// TRESCounts parses a TRES string ("1=4,2=16000,5=4") into id and count
// pairs; a malformed entry is an error naming it.
func TRESCounts(s string) ([][2]uint64, error) {
	var out [][2]uint64
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		k, v, found := strings.Cut(f, "=")
		id, err1 := strconv.ParseUint(k, 10, 32)
		n, err2 := strconv.ParseUint(v, 10, 64)
		if !found || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("TRES string %q: entry %q: expected id=count", s, f)
		}
		out = append(out, [2]uint64{id, n})
	}
	return out, nil
}

// TRESCount is the count of TRES id in a TRES string ("1=4,2=16000,5=4").
// ok is false when the id is absent. A malformed entry is an error naming
// it.
func TRESCount(s string, id int) (count uint64, ok bool, err error) {
	all, err := TRESCounts(s)
	if err != nil {
		return 0, false, err
	}
	for _, e := range all {
		if e[0] == uint64(id) {
			return e[1], true, nil
		}
	}
	return 0, false, nil
}

// WeighByQOS applies QOS UsageFactor to rollup rows: the rollups do not
// apply it, and where the 24.11+ per-QOS table splits a row (split, the
// same period) the row becomes the sum of its split weighted by each
// QOS's factor (factors by id_qos; a QOS without one counts 1).
func WeighByQOS(rows []Row, split []QOSRow, factors map[uint32]float64) {
	type at struct {
		Key
		start int64
	}
	weighted := map[at]float64{}
	for _, u := range split {
		weighted[at{Key{u.Assoc, u.TRES}, u.Start}] += u.AllocSecs * factor(factors, u.QOS)
	}
	for i, u := range rows {
		if v, ok := weighted[at{Key{u.Assoc, u.TRES}, u.Start}]; ok {
			rows[i].AllocSecs = v
		}
	}
}

// factor is a QOS's UsageFactor, 1 for one that has none.
func factor(factors map[uint32]float64, qos uint32) float64 {
	if f, ok := factors[qos]; ok && f >= 0 {
		return f
	}
	return 1
}
