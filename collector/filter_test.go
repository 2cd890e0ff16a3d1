package collector

import (
	"testing"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
)

// TestFilterKeepsJobsRight: the series budget is applied when a snapshot
// is published, and a job refers to its association by ID: after users
// are left out, a job finds its own association or none, never another
// (with slice indexes, dropping rows pointed jobs at their neighbours).
func TestFilterKeepsJobsRight(t *testing.T) {
	cl := result.Cluster{Name: "c", Assocs: []result.Association{
		{ID: 1, Account: "root"},
		{ID: 2, Account: "a", Parent: "root"},
		{ID: 3, Account: "a", User: "u1", Parent: "a"},
		{ID: 4, Account: "b", Parent: "root"},
		{ID: 5, Account: "b", User: "u2", Parent: "b"},
	}, Jobs: []result.Job{{ID: 10, AssocID: 5, Account: "b", User: "u2"}, {ID: 11, AssocID: 4, Account: "b"}}}
	c := New()
	c.Filter = Filter{NoUsers: true}
	if err := c.Publish(&result.Snapshot{Clusters: []result.Cluster{cl}}); err != nil {
		t.Fatal(err)
	}
	got := c.Current().Clusters[0]
	if len(got.Assocs) != 3 {
		t.Fatalf("%d associations kept: want the 3 accounts", len(got.Assocs))
	}
	for _, j := range got.Jobs {
		a := got.Association(j.AssocID)
		if a != nil && (a.Account != j.Account || a.User != j.User) {
			t.Errorf("job %d (%s/%s) points at %s/%s", j.ID, j.Account, j.User, a.Account, a.User)
		}
	}
	if a := got.Association(4); a == nil || a.Account != "b" {
		t.Errorf("job 11's account b not found by its ID")
	}
}
