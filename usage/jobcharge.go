package usage

import (
	"fmt"
	"math"
)

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

// rowExcess is, per TRES, the usage j adds beyond what the rows count of
// it: the rows count each second in the rolled-up hours at the TRES
// counts tres_alloc records, the billing truncated to an integer and,
// unless RowsByQOS, without UsageFactor, where slurmctld charged per
// (jobTRES), the excess weighed as the rows' seconds are (rowWeight);
// and they count nothing of the charge at submission (submitCharge),
// which comes whole.
func (in *Inputs) rowExcess(j Job, per []tresCharge) []tresCharge {
	submit := in.submitCharge(j)
	rolled := j.Start < in.LastHourly && (j.End == 0 || j.End > j.Start)
	if !rolled && submit == 0 {
		return nil
	}
	rowFactor := 1.0
	if in.RowsByQOS {
		rowFactor = factor(in.UsageFactor, j.QOS)
	}
	var out []tresCharge
	var w float64
	for _, c := range per {
		e := submit * c.per
		// recorded < 0: billing charged as the CPUs, of which the rows
		// have none
		if d := c.per - c.recorded*rowFactor; rolled && c.recorded >= 0 && d != 0 {
			if w == 0 {
				w = in.rowWeight(j)
			}
			e += d * w
		}
		if e != 0 {
			out = append(out, tresCharge{id: c.id, per: e})
		}
	}
	return out
}

// submitCharge is what j's charge at its submission weighs at At per unit
// of count (0 unless Job.SubmitCharge): slurmctld 26.05 ends the pending
// components of a heterogeneous job once it has checked their limits
// (proc_req.c _het_job_val_rem), and ending a job charges it from the last
// pass, or its start, to the moment, decayed (priority_p_job_end,
// _apply_new_usage); a pending job has no start. It is the last partial
// interval of a job that ended then, which slurmctld charges only with
// limits enforced, the one case it happens in.
func (in *Inputs) submitCharge(j Job) float64 {
	if j.SubmitCharge == 0 {
		return 0
	}
	p, s := in.Passes, float64(j.SubmitCharge)
	p.ChargeJobEnd = true
	last := p.LastPass(s)
	return p.JobUsageIn(last, s, in.Since, math.Inf(1), in.At, 1)
}
