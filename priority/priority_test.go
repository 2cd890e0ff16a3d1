package priority

import (
	"math"
	"testing"
)

// The expected values below are derived by hand from the rules in
// set_priority_factors (priority_multifactor.c, 22.05), not by running
// this code.

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 && !(math.IsNaN(got) && math.IsNaN(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

func TestJobSize(t *testing.T) {
	cl := &Cluster{CPUs: 256, Nodes: 4}
	j := &Job{CPUs: 64, Nodes: 2, TimeLimit: 60}
	c := &Config{}
	near(t, "favor large", c.jobSize(cl, j), (2.0/4+64.0/256)/2) // 0.375
	c.FavorSmall = true
	near(t, "favor small", c.jobSize(cl, j), (2.0/4+192.0/256)/2) // 0.625
	// relative to time: max(nodes × CPUs per node, CPUs) per minute
	c.SmallRelativeToTime = true
	near(t, "small relative to time", c.jobSize(cl, &Job{CPUs: 16, Nodes: 1, TimeLimit: 60}), 1-64.0/60/256)
	c.FavorSmall = false
	near(t, "large relative to time", c.jobSize(cl, &Job{CPUs: 160, Nodes: 1, TimeLimit: 2}), 160.0/2/256)
	// no time limit of its own (NO_VAL in the job table): the partition's
	near(t, "partition MaxTime", c.jobSize(cl, &Job{CPUs: 160, Nodes: 1, TimeLimit: NoVal, PartitionMaxTime: 4}), 160.0/4/256)
	// at most 1
	near(t, "clamped", c.jobSize(cl, &Job{CPUs: 256, Nodes: 4, TimeLimit: 0.5}), 1)
	c.SmallRelativeToTime = false
	near(t, "no CPU count", c.jobSize(cl, &Job{Nodes: 1}), 0.25)
	near(t, "unknown cluster", c.jobSize(&Cluster{}, j), math.NaN())
}

func TestAge(t *testing.T) {
	c := &Config{MaxAge: 1000}
	c.Weights[Age] = 1
	cl := &Cluster{}
	j := &Job{Submit: 100, Eligible: 400}
	r := c.Compute(cl, j, 900)
	near(t, "from the begin time", r.Normalized[Age], 0.5)
	if !r.AccrueExact || r.Accrue != 400 {
		t.Errorf("accrue %d exact %v, want 400 exact", r.Accrue, r.AccrueExact)
	}
	c.AccrueAlways = true
	near(t, "ACCRUE_ALWAYS: from submission", c.Compute(cl, j, 900).Normalized[Age], 0.8)
	near(t, "past PriorityMaxAge", c.Compute(cl, j, 5000).Normalized[Age], 1)
	near(t, "before", c.Compute(cl, j, 50).Normalized[Age], 0)
	c.AccrueAlways, c.EnforceLimits = false, true
	if r := c.Compute(cl, j, 900); r.AccrueExact {
		t.Error("with accrue limits the begin time is only a bound")
	}
	near(t, "not eligible", c.Compute(cl, &Job{Submit: 100}, 900).Normalized[Age], 0)
}

func TestNormalization(t *testing.T) {
	c := &Config{}
	for f := Age; f < TRES; f++ {
		c.Weights[f] = 1
	}
	cl := &Cluster{MaxPartition: 40, MaxQOS: 400, MaxAssoc: 50, CPUs: 1, Nodes: 1}
	j := &Job{PartitionFactor: 10, QOSPriority: 100, AssocPriority: 20}
	r := c.Compute(cl, j, 0)
	near(t, "partition", r.Normalized[Partition], 0.25)
	near(t, "qos", r.Normalized[QOS], 0.25)
	near(t, "assoc", r.Normalized[Assoc], 0.4)
	c.NoNormalPart, c.NoNormalQOS, c.NoNormalAssoc = true, true, true
	r = c.Compute(cl, j, 0)
	near(t, "NO_NORMAL_PART", r.Normalized[Partition], 10)
	near(t, "NO_NORMAL_QOS", r.Normalized[QOS], 100)
	near(t, "NO_NORMAL_ASSOC", r.Normalized[Assoc], 20)
	// partition_mgr.c starts the largest PriorityJobFactor at 1
	c.NoNormalPart = false
	near(t, "partition max below 1", c.Compute(&Cluster{}, &Job{PartitionFactor: 0.5}, 0).Normalized[Partition], 0.5)
	near(t, "no QOS priority anywhere", c.Compute(&Cluster{}, &Job{}, 0).Normalized[QOS], 0)
}

func TestTRESAndSum(t *testing.T) {
	c := &Config{WeightTRES: map[string]float64{"cpu": 1000, "mem": 2000}}
	c.Weights[FairShare] = 10000
	j := &Job{TRES: map[string]float64{"cpu": 64, "mem": 4000}, PartitionTRES: map[string]float64{"cpu": 256, "mem": 8000}, FairShare: 0.12345}
	r := c.Compute(&Cluster{}, j, 0)
	near(t, "tres cpu", r.TRES["cpu"], 0.25)
	near(t, "tres mem", r.TRES["mem"], 0.5)
	near(t, "tres weighted", r.Weighted[TRES], 250+1000)
	// 1234.5 + 1250, truncated
	near(t, "priority", r.Priority, 2484)
	if r.Dominant != TRES {
		t.Errorf("dominant %v, want tres", r.Dominant)
	}
	c.NoNormalTRES = true
	near(t, "NO_NORMAL_TRES", c.Compute(&Cluster{}, j, 0).Weighted[TRES], 64*1000+4000*2000)
	c.NoNormalTRES = false
	j.PartitionTRES = nil
	if r := c.Compute(&Cluster{}, j, 0); !math.IsNaN(r.Priority) {
		t.Errorf("partition TRES unknown: priority %v, want NaN", r.Priority)
	}
	// priority 0 is for held jobs: at least 1
	near(t, "at least 1", (&Config{}).Compute(&Cluster{}, &Job{}, 0).Priority, 1)
}
