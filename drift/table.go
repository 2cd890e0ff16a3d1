package drift

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report for a terminal: one line per association
// with its computed and reported FairShare, its largest drift and what
// else drifts, then the summary; then the formula part, if any.
func (r *Report) WriteTable(w io.Writer) error {
	if r.Formula != nil {
		fmt.Fprintln(w, "The database's usage against Slurm's (usage drift; REPORTED: the factor Slurm's usage gives):")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ACCOUNT\tUSER\tPARTITION\tSTATUS\tFAIRSHARE\tREPORTED\tLARGEST DRIFT\tNOTES\n")
	for _, e := range r.Associations {
		var comp, rep Num = Num(math.NaN()), Num(math.NaN())
		if e.Computed != nil {
			comp = e.Computed.FairShare
		}
		if e.Reported != nil {
			rep = e.Reported.FairShare
		}
		worst := ""
		if e.Drift != nil {
			best := 0.0
			for k, p := range e.Drift.fields() {
				if d := math.Abs(float64(*p)); d > best {
					best, worst = d, fmt.Sprintf("%s %+.6g", Fields[k], float64(*p))
				}
			}
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strings.Repeat(" ", e.Depth), e.Account, e.User, e.Partition, e.Status, cell(comp), cell(rep), worst, strings.Join(e.Notes, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nalgorithm %s, tolerance %g", r.Algorithm, r.Tolerance)
	for _, s := range Statuses {
		if n := r.Summary.Counts[s]; n > 0 || s != StatusLagNotExcluded {
			fmt.Fprintf(w, ", %s %d", s, n)
		}
	}
	if n := r.Summary.NotYetComputed; n > 0 {
		fmt.Fprintf(w, ", not yet computed by slurmctld %d", n)
	}
	fmt.Fprintln(w)
	if r.Note != "" {
		fmt.Fprintf(w, "note: %s\n", r.Note)
	}
	for _, b := range r.Billing {
		if x := b.Example; x != nil {
			fmt.Fprintf(w, "billing: partition %q: %d of %d jobs started since slurm.conf last changed were billed other than its TRESBillingWeights give (job %d: %g, slurm.conf %g)\n",
				b.Partition, b.Mismatched, b.Jobs, x.Job, x.Recorded, x.Expected)
		}
	}
	if _, err := fmt.Fprintf(w, "largest drift: %s\n", r.Summary.MaxDrift.String()); err != nil || r.Formula == nil {
		return err
	}
	fmt.Fprintln(w, "\nSlurm's values against its own usage replayed (formula drift):")
	return r.Formula.WriteTable(w)
}

// String lists the values as name=value, to four significant digits.
func (v *Values) String() string {
	var b strings.Builder
	for k, p := range v.fields() {
		if k > 0 {
			b.WriteByte(' ')
		}
		s := cell(*p)
		if f := float64(*p); !math.IsNaN(f) && !math.IsInf(f, 0) {
			s = fmt.Sprintf("%.4g", f)
		}
		fmt.Fprintf(&b, "%s=%s", Fields[k], s)
	}
	return b.String()
}

func cell(n Num) string {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return fmt.Sprintf("%.6f", f)
}
