package usage

import "fmt"

// tresCharge is what a job charges per second of one TRES, and the count
// tres_alloc records of it, which the rollups count (-1: none recorded:
// billing charged as the CPUs).
type tresCharge struct {
	id       uint32
	per      float64
	recorded float64
}

// jobTRES is what a job charges per second: each TRES count but energy
// times its QOS UsageFactor, its billing the one slurmctld charges (Billed
// where priced), and billing alone (the CPUs when the job recorded no
// billing, as slurmctld bills them).
func jobTRES(j Job, factors map[uint32]float64) (per []tresCharge, billing float64, err error) {
	counts, err := TRESCounts(j.TRESAlloc)
	if err != nil {
		return nil, 0, fmt.Errorf("job_db_inx=%d: %w: left out", j.Inx, err)
	}
	uf := factor(factors, j.QOS)
	billing = -1
	for _, c := range counts {
		if c[0] == TRESEnergy || c[1] == 0 {
			continue
		}
		n, rec := float64(c[1]), float64(c[1])
		if c[0] == TRESBilling {
			if j.Priced {
				n = j.Billed
			}
			billing = n * uf
		}
		per = append(per, tresCharge{uint32(c[0]), n * uf, rec})
	}
	if billing < 0 {
		cpus, _, _ := TRESCount(j.TRESAlloc, TRESCPU)
		billing = float64(cpus) * uf
		per = append(per, tresCharge{TRESBilling, billing, -1})
	}
	return per, billing, nil
}

// JobBilling is what a job charges per second of billing, QOS UsageFactor
// (factors by id_qos) applied: the CPUs where the job recorded no billing,
// as slurmctld bills them and the rebuild charges.
func JobBilling(j Job, factors map[uint32]float64) (float64, error) {
	_, billing, err := jobTRES(j, factors)
	return billing, err
}

// rowExcess is, per TRES, the usage j's seconds in the rolled-up hours
// add beyond what the rows count of them: the rows count each second at
// the TRES counts tres_alloc records, the billing truncated to an integer
// and, unless RowsByQOS, without UsageFactor, where slurmctld charged per
// (jobTRES). The excess is weighed as the rows' seconds are (rowWeight).
func (in *Inputs) rowExcess(j Job, per []tresCharge) []tresCharge {
	if j.Start >= in.LastHourly || j.End != 0 && j.End <= j.Start {
		return nil
	}
	rowFactor := 1.0
	if in.RowsByQOS {
		rowFactor = factor(in.UsageFactor, j.QOS)
	}
	var out []tresCharge
	var w float64
	for _, c := range per {
		if c.recorded < 0 {
			continue // billing charged as the CPUs: the rows have none
		}
		if d := c.per - c.recorded*rowFactor; d != 0 {
			if w == 0 {
				w = in.rowWeight(j)
			}
			out = append(out, tresCharge{id: c.id, per: d * w})
		}
	}
	return out
}
