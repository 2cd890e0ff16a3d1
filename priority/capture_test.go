package priority_test

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/priority"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmconf"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/sshare"
)

// TestCaptures checks pending job 10 of the real 24.11 and 25.11 captures
// (testdata/README.md) against their sprio -l: the weighted age and
// fairshare factors as sprio rounds them (%.0f) and the priority as it
// truncates it. The fairshare factor is sshare's, taken in the same
// second; the age is computed anywhere in the PriorityCalcPeriod before
// the capture, when the pass sprio shows ran.
func TestCaptures(t *testing.T) {
	for _, dir := range []string{"../testdata/slurm-24.11", "../testdata/slurm-25.11"} {
		for _, tc := range []struct{ conf, sshare, sprio string }{
			{"slurm.conf", "sshare-a-l-P.txt", "sprio-l.txt"},
			{"slurm-classic.conf", "sshare-a-l-P-classic.txt", "sprio-l-classic.txt"},
		} {
			t.Run(filepath.Base(dir)+"/"+tc.sprio, func(t *testing.T) {
				conf, err := slurmconf.Load(os.DirFS(dir), tc.conf)
				if err != nil {
					t.Fatal(err)
				}
				sp := readSprio(t, filepath.Join(dir, tc.sprio))
				job := readJob(t, filepath.Join(dir, "job_table.tsv"), sp["JOBID"])
				out, err := sshare.ParseFile(filepath.Join(dir, tc.sshare))
				if err != nil {
					t.Fatal(err)
				}
				fs := math.NaN()
				for _, r := range out.Rows {
					if r.Account == sp["ACCOUNT"] && r.User == sp["USER"] {
						fs = r.FairShare
					}
				}
				at := captureTime(t, dir, tc.sprio)
				pc := conf.Priority()
				j := &priority.Job{Submit: job["time_submit"], Eligible: job["time_eligible"], CPUs: float64(job["cpus_req"]), FairShare: fs}
				for _, now := range []int64{at - 60, at} {
					r := pc.Compute(&priority.Cluster{}, j, now)
					for _, c := range []struct {
						col string
						f   priority.Factor
					}{{"AGE", priority.Age}, {"FAIRSHARE", priority.FairShare}} {
						want, _ := strconv.ParseFloat(sp[c.col], 64)
						// sshare prints FairShare to 6 places: 0.05 of a
						// 100000 weight either way
						if got := math.Round(r.Weighted[c.f]); math.Abs(got-want) > 1 {
							t.Errorf("at %d: %s %.0f, sprio %.0f", now, c.col, got, want)
						}
					}
					want, _ := strconv.ParseFloat(sp["PRIORITY"], 64)
					if math.Abs(r.Priority-want) > 1 {
						t.Errorf("at %d: priority %.0f, sprio %.0f", now, r.Priority, want)
					}
				}
			})
		}
	}
}

// readSprio reads sprio -l's one job: column name to value.
func readSprio(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%s: expected a header and one job", path)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	m := map[string]string{}
	for i, h := range head {
		if i < len(row) {
			if _, dup := m[h]; !dup { // PARTITION twice: the name first
				m[h] = row[i]
			}
		}
	}
	return m
}

// readJob reads the numeric columns of one job's row of a job_table TSV.
func readJob(t *testing.T, path, id string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var head []string
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if head == nil {
			head = cols
			continue
		}
		m := map[string]int64{}
		for i, h := range head {
			if i < len(cols) {
				if v, err := strconv.ParseInt(cols[i], 10, 64); err == nil {
					m[h] = v
				}
			}
		}
		if strconv.FormatInt(m["id_job"], 10) == id {
			return m
		}
	}
	t.Fatalf("%s: no job %s", path, id)
	return nil
}

// captureTime is when the capture holding sprio was taken
// (timestamps.txt of the captures: the last Fair Tree or classic start).
func captureTime(t *testing.T, dir, sprio string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "timestamps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := "fairtree sshare start"
	if strings.Contains(sprio, "classic") {
		prefix = "classic sshare start"
	}
	var at int64
	for _, l := range strings.Split(string(b), "\n") {
		if _, e, ok := strings.Cut(l, "epoch="); ok && strings.HasPrefix(l, prefix) {
			at, _ = strconv.ParseInt(e, 10, 64)
		}
	}
	if at == 0 {
		t.Fatalf("%s/timestamps.txt: no %q line", dir, prefix)
	}
	return at
}
