package explain

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/drift"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
)

// FactorLine is one factor of a job's priority.
type FactorLine struct {
	Factor     string    `json:"factor"`
	Normalized drift.Num `json:"normalized"`
	Weight     float64   `json:"weight"`
	Weighted   drift.Num `json:"weighted"`
	// Range is the normalized factor over the possible moments of
	// slurmctld's last priority pass, where they move it.
	Range *[2]drift.Num `json:"range,omitempty"`
}

// JobExplanation is one pending job's priority in one partition.
type JobExplanation struct {
	Cluster   string    `json:"cluster"`
	At        time.Time `json:"at"`
	Job       uint32    `json:"job_id"`
	ArrayTask string    `json:"array_task,omitempty"`
	Partition string    `json:"partition"`
	Account   string    `json:"account"`
	User      string    `json:"user"`
	QOS       string    `json:"qos"`
	Priority  drift.Num `json:"priority"`
	// PriorityRange is the priority over the possible moments of
	// slurmctld's last priority pass (Phase): sprio's lies inside.
	PriorityRange [2]drift.Num `json:"priority_range"`
	Phase         result.Phase `json:"phase"`
	Dominant      string       `json:"dominant_factor,omitempty"`
	Factors       []FactorLine `json:"factors"`
	// TRES is each weighted TRES's normalized factor.
	TRES map[string]drift.Num `json:"tres,omitempty"`
	// Unknown lists what the database cannot tell and what was assumed.
	Unknown   []string     `json:"unknown"`
	Fairshare *Explanation `json:"fairshare,omitempty"`
}

// Job explains pending job id as of at: one explanation per partition
// it is pending in, each with its association's fairshare path.
func Job(cl result.Cluster, conf *slurmconf.Config, id uint32, at time.Time, phase result.Phase) ([]JobExplanation, error) {
	if conf.PriorityType != "priority/multifactor" {
		return nil, fmt.Errorf("job %d: slurm.conf's PriorityType is %s: only priority/multifactor weighs factors", id, conf.PriorityType)
	}
	if cl.Jobs == nil {
		return nil, fmt.Errorf("job %d: job priorities are computed for slurm.conf's cluster %s only, not %s", id, conf.ClusterName, cl.Name)
	}
	var out []JobExplanation
	for i := range cl.Jobs {
		j := &cl.Jobs[i]
		if j.ID != id {
			continue
		}
		x := jobExplanation(cl, conf, j, at)
		x.Phase = phase
		if a := cl.Association(j.AssocID); a != nil {
			if exps, err := User(cl, at, a.User, a.Account, phase); err == nil {
				for k := range exps {
					if exps[k].Path[len(exps[k].Path)-1].Partition == a.Partition {
						x.Fairshare = &exps[k]
					}
				}
			}
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("job %d: not pending in cluster %s at %s (or held, or not yet eligible: sprio leaves those out too)", id, cl.Name, at.Format(time.RFC3339))
	}
	return out, nil
}

func jobExplanation(cl result.Cluster, conf *slurmconf.Config, j *result.Job, at time.Time) JobExplanation {
	x := JobExplanation{Cluster: cl.Name, At: at, Job: j.ID, ArrayTask: j.ArrayTask, Partition: j.Partition, Account: j.Account, User: j.User,
		QOS: j.QOS, Priority: drift.Num(j.Priority)}
	if j.Dominant >= 0 {
		x.Dominant = j.Dominant.String()
	}
	x.PriorityRange = [2]drift.Num{x.Priority, x.Priority}
	if r := j.Range; r != nil {
		x.PriorityRange = [2]drift.Num{drift.Num(r.Low.Priority), drift.Num(r.High.Priority)}
	}
	for f := priority.Factor(0); f < priority.NumFactors; f++ {
		l := FactorLine{Factor: f.String(), Normalized: drift.Num(j.Normalized[f]), Weight: cl.Weights[f], Weighted: drift.Num(j.Weighted[f])}
		if r := j.Range; r != nil && r.Low.Normalized[f] != r.High.Normalized[f] {
			l.Range = &[2]drift.Num{drift.Num(r.Low.Normalized[f]), drift.Num(r.High.Normalized[f])}
		}
		x.Factors = append(x.Factors, l)
	}
	if len(j.TRES) > 0 {
		x.TRES = map[string]drift.Num{}
		for name, v := range j.TRES {
			x.TRES[name] = drift.Num(v)
		}
	}
	x.Unknown = []string{
		"site factor: not in the database; 0 assumed",
		"nice: not in the database; 0 assumed",
		fmt.Sprintf("priority as the priority pass at %s computes it; sprio shows the last pass (PriorityCalcPeriod %s)", at.Format(time.RFC3339), conf.PriorityCalcPeriod),
	}
	if !j.AccrueExact {
		x.Unknown = append(x.Unknown, fmt.Sprintf("age: AccountingStorageEnforce=limits: accrue limits may have started the age after the eligible time (%s) used here", time.Unix(j.Accrue, 0).Format(time.RFC3339)))
	}
	if math.IsNaN(j.Normalized[priority.TRES]) {
		x.Unknown = append(x.Unknown, fmt.Sprintf("tres: partition %s does not hold every node of slurm.conf: its TRES totals are not in the database", j.Partition))
	}
	if cl.Association(j.AssocID) == nil {
		x.Unknown = append(x.Unknown, "fairshare: the job's association is not in the database's tree")
	}
	return x
}

// WriteTable prints the job's explanation as explain --job's table.
func (x JobExplanation) WriteTable(w io.Writer) {
	job := fmt.Sprint(x.Job)
	if x.ArrayTask != "" {
		job += "_" + x.ArrayTask
	}
	fmt.Fprintf(w, "job %s in partition %s, user %s, account %s, qos %s: cluster %s at %s\n\n", job, term(x.Partition), term(x.User), term(x.Account), term(x.QOS), term(x.Cluster), x.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "factor\tnormalized\tweight\tweighted\trange (normalized)\t")
	for _, f := range x.Factors {
		r := ""
		if f.Range != nil {
			r = normNum(f.Range[0]) + "–" + normNum(f.Range[1])
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%s\t%s\t\n", f.Factor, normNum(f.Normalized), f.Weight, weightedNum(f.Weighted), r)
	}
	names := make([]string, 0, len(x.TRES))
	for n := range x.TRES {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(tw, "  tres %s\t%s\t\t\t\n", term(n), normNum(x.TRES[n]))
	}
	r := ""
	if x.PriorityRange[0] != x.PriorityRange[1] {
		r = weightedNum(x.PriorityRange[0]) + "–" + weightedNum(x.PriorityRange[1])
	}
	fmt.Fprintf(tw, "priority\t\t\t%s\t%s\t\n", weightedNum(x.Priority), r)
	tw.Flush()
	if r != "" {
		fmt.Fprintf(w, "\nranges: %s\n", x.Phase.Describe())
	}
	if x.Dominant != "" {
		fmt.Fprintf(w, "\nmost of it: %s\n", term(x.Dominant))
	}
	fmt.Fprintln(w, "\nnot known from the database:")
	for _, u := range x.Unknown {
		fmt.Fprintf(w, "  %s\n", term(u))
	}
	fmt.Fprintln(w)
	if x.Fairshare != nil {
		x.Fairshare.WriteTable(w)
	}
}

// normNum prints a normalized factor as sprio -n does (%.7f).
func normNum(n drift.Num) string {
	if math.IsNaN(float64(n)) {
		return "-"
	}
	return fmt.Sprintf("%.7f", float64(n))
}

// weightedNum prints a weighted factor as sprio does (%.0f).
func weightedNum(n drift.Num) string {
	if math.IsNaN(float64(n)) {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(n))
}
