package gen

import (
	"context"
	"database/sql"
	"time"
)

// hourUse is an hour's seconds of allTRES.
type hourUse struct {
	start int64
	secs  [len(allTRES)]int64
}

// charge adds j's seconds to active, as slurmdbd's hourly rollup does:
// each hour gets the job's overlap with it times what the job allocates,
// a running job's up to the last rollup, now. The hours stay in order as
// long as no job starts in an hour before the last one charged.
func charge(active []hourUse, j job, now int64) []hourUse {
	end := j.end
	if end == 0 {
		end = now
	}
	for h := j.start / 3600 * 3600; h < end; h += 3600 {
		if n := len(active); n == 0 || active[n-1].start != h {
			active = append(active, hourUse{start: h})
		}
		secs := min(end, h+3600) - max(j.start, h)
		for i, a := range j.alloc {
			active[len(active)-1].secs[i] += secs * a
		}
	}
	return active
}

// writeUsage writes the TRES allTRES[tres] of one association's active
// hours, and the days and months they sum to (UTC), as slurmdbd rolls
// them up.
func writeUsage(ctx context.Context, db *sql.DB, tables map[string]*batch, id, tres int, active []hourUse, now int64) error {
	var daySum, monthSum int64
	var dayStart, monthStart int64 = -1, -1
	flush := func(table string, start, sum int64) error {
		if sum == 0 {
			return nil
		}
		// slurmdbd writes a row when it rolls the period up
		rolled := time.Unix(start, 0).UTC().AddDate(0, 0, 1)
		if table == "assoc_usage_month_table" {
			rolled = time.Unix(start, 0).UTC().AddDate(0, 1, 0)
		}
		at := min(rolled.Unix(), now)
		return tables[table].add(ctx, db, at, at, 0, id, allTRES[tres], start, sum)
	}
	for _, u := range active {
		secs := u.secs[tres]
		t := time.Unix(u.start, 0).UTC()
		if d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix(); d != dayStart {
			if err := flush("assoc_usage_day_table", dayStart, daySum); err != nil {
				return err
			}
			dayStart, daySum = d, 0
		}
		if m := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix(); m != monthStart {
			if err := flush("assoc_usage_month_table", monthStart, monthSum); err != nil {
				return err
			}
			monthStart, monthSum = m, 0
		}
		if err := tables["assoc_usage_hour_table"].add(ctx, db, u.start+3600, u.start+3600, 0, id, allTRES[tres], u.start, secs); err != nil {
			return err
		}
		daySum += secs
		monthSum += secs
	}
	if err := flush("assoc_usage_day_table", dayStart, daySum); err != nil {
		return err
	}
	return flush("assoc_usage_month_table", monthStart, monthSum)
}
