package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/build"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/internal/mariadbtest"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/result"
	"github.com/slurmdbd-exporter/slurmdbd_exporter/slurmdbd"
)

// TestSchemaLogged: the schema a cluster's tables were read by (the 24.11
// capture: lft/rgt still there, lineage, account flags, per-QOS usage
// tables) is logged at info once when first read, not again while it
// stays, and again when it changes (acct_table.flags dropped, seen at the
// Refresher's next look at the schema); build.Build publishes it with the
// cluster. A change slurmdbd did not mark is seen at the next look; a
// table slurmdbd redefined (table_defs_table) or a conversion
// (convert_version_table raised) at the next refresh.
func TestSchemaLogged(t *testing.T) {
	srv := mariadbtest.Start(t, "")
	dsn := storageDB(t, srv, "a", "")
	e, logs := storageExporter(t, dsn, "")
	at := time.Unix(1795320600, 0)
	type logged struct {
		Level, Message, SlurmCluster            string
		LftRgt, Lineage, AccountFlags, QOSUsage *bool
	}
	schemaLogs := func() []logged {
		var out []logged
		for line := range strings.Lines(logs.String()) {
			var l struct {
				Level        string `json:"level"`
				Message      string `json:"message"`
				SlurmCluster string `json:"slurm_cluster"`
				LftRgt       *bool  `json:"lft_rgt"`
				Lineage      *bool  `json:"lineage"`
				AccountFlags *bool  `json:"account_flags"`
				QOSUsage     *bool  `json:"qos_usage"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && strings.Contains(l.Message, "schema") {
				out = append(out, logged{l.Level, l.Message, l.SlurmCluster, l.LftRgt, l.Lineage, l.AccountFlags, l.QOSUsage})
			}
		}
		return out
	}
	refresh := func(at time.Time) *result.Schema {
		in, err := e.Refresh(context.Background(), "v2411", at)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := build.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		return cl.Schema
	}
	want := result.Schema{LftRgt: true, Lineage: true, AccountFlags: true, QOSUsage: true}
	is := func(b *bool, v bool) bool { return b != nil && *b == v }

	if s := refresh(at); s == nil || *s != want {
		t.Fatalf("published schema %+v, want %+v", s, want)
	}
	refresh(at.Add(time.Minute))
	l := schemaLogs()
	if len(l) != 1 || l[0].Level != "info" || l[0].SlurmCluster != "v2411" || !is(l[0].LftRgt, true) || !is(l[0].Lineage, true) ||
		!is(l[0].AccountFlags, true) || !is(l[0].QOSUsage, true) {
		t.Fatalf("after two refreshes, want one info line naming v2411's schema: %+v\n%s", l, logs)
	}

	srv.MustSQL("USE a; ALTER TABLE acct_table DROP COLUMN flags")
	want.AccountFlags = false
	if s := refresh(at.Add(slurmdbd.RecheckHours + 2*time.Minute)); s == nil || *s != want {
		t.Errorf("published schema after the change %+v, want %+v", s, want)
	}
	l = schemaLogs()
	if len(l) != 2 || l[1].Level != "info" || !strings.Contains(l[1].Message, "changed") || !is(l[1].AccountFlags, false) || !is(l[1].Lineage, true) {
		t.Errorf("after the schema changed, want a second info line saying so: %+v\n%s", l, logs)
	}

	later := at.Add(slurmdbd.RecheckHours + 2*time.Minute)
	srv.MustSQL("USE a; ALTER TABLE acct_table ADD COLUMN flags int unsigned default 0 not null")
	if s := refresh(later.Add(time.Minute)); s == nil || *s != want {
		t.Errorf("a column added without a conversion, before the next look: published %+v, want the schema as it was %+v", s, want)
	}
	// slurmdbd's start stamps the tables it redefined with its moment,
	// a release that keeps the conversion's version included (24.05
	// after 23.11)
	srv.MustSQL("USE a; UPDATE table_defs_table SET mod_time = UNIX_TIMESTAMP() WHERE table_name = 'acct_table'")
	want.AccountFlags = true
	if s := refresh(later.Add(2 * time.Minute)); s == nil || *s != want {
		t.Errorf("after slurmdbd redefined a table: published %+v, want %+v at once", s, want)
	}
	srv.MustSQL("USE a; ALTER TABLE acct_table DROP COLUMN flags")
	srv.MustSQL("USE a; UPDATE convert_version_table SET version = version + 1")
	want.AccountFlags = false
	if s := refresh(later.Add(3 * time.Minute)); s == nil || *s != want {
		t.Errorf("after slurmdbd's conversion: published %+v, want %+v at once", s, want)
	}
}
