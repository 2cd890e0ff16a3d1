package slurmdbd

import (
	"context"
	"time"

	"github.com/slurmdbd-exporter/slurmdbd_exporter/fairshare"
)

// horizonHalfLives is how far back usage is read: 40 half-lives weigh
// 2^-40, below a millionth of a billing-second per day of a full cluster.
const horizonHalfLives = 40

// Snapshot is one cluster's association tree with its usage rebuilt.
type Snapshot struct {
	Cluster string
	Layout  Layout
	Rows    []Assoc
	// Tree.Assocs carry the rebuilt RawUsage.
	Tree    *Tree
	LastRan LastRan
	At      time.Time
	// Problems are rows left out, each naming the row.
	Problems []error
}

// Snapshot reads the cluster and rebuilds raw usage at at. since cuts
// history at the last usage reset (zero: none).
func (c Cluster) Snapshot(ctx context.Context, at time.Time, passes fairshare.Passes, since time.Time, loc *time.Location) (*Snapshot, error) {
	l, err := c.Layout(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Associations(ctx, l)
	if err != nil {
		return nil, err
	}
	tree, err := BuildTree(rows)
	if err != nil {
		return nil, err
	}
	lastRan, err := c.LastRan(ctx)
	if err != nil {
		return nil, err
	}
	qos, err := c.db.QOS(ctx)
	if err != nil {
		return nil, err
	}
	if loc == nil {
		loc = time.Local
	}
	end := at.Unix() + 1
	from := int64(0)
	if passes.HalfLife > 0 {
		from = at.Unix() - int64(horizonHalfLives*passes.HalfLife)
	}
	if !since.IsZero() {
		from = max(from, since.Unix())
	}
	in := UsageInputs{Rows: rows, Tree: tree, QOS: qos, LastRan: lastRan, Passes: passes, At: float64(at.Unix()) + float64(at.Nanosecond())/1e9,
		Location: loc}
	if !since.IsZero() {
		in.Since = float64(since.Unix())
	}
	if lastRan.OK {
		// The finest table that still has the data: hours back to the
		// first whole day PurgeUsageAfter left, days before that, months
		// before the days.
		hourCut, dayCut := from, from
		if oldest, ok, err := c.Oldest(ctx, Hour); err != nil {
			return nil, err
		} else if ok && oldest > from {
			hourCut = nextBoundary(oldest, loc, 0, 0, 1)
		}
		if oldest, ok, err := c.Oldest(ctx, Day); err != nil {
			return nil, err
		} else if ok && oldest > from && hourCut > from {
			dayCut = nextBoundary(oldest, loc, 0, 1, 0)
		}
		if in.Hours, err = c.Usage(ctx, Hour, hourCut, end); err != nil {
			return nil, err
		}
		if hourCut > from {
			if in.Days, err = c.Usage(ctx, Day, dayCut, hourCut); err != nil {
				return nil, err
			}
		}
		if dayCut > from {
			if in.Months, err = c.Usage(ctx, Month, from, dayCut); err != nil {
				return nil, err
			}
		}
	}
	jobsFrom := max(lastRan.Hourly, from)
	if in.Jobs, err = c.Jobs(ctx, jobsFrom, end); err != nil {
		return nil, err
	}
	raw, problems := RawUsage(in)
	for i := range tree.Assocs {
		tree.Assocs[i].RawUsage = raw[i]
	}
	return &Snapshot{Cluster: c.Name, Layout: l, Rows: rows, Tree: tree, LastRan: lastRan, At: at,
		Problems: append(tree.Problems, problems...)}, nil
}

// nextBoundary is the first local day (days=1) or month (months=1)
// boundary at or after t.
func nextBoundary(t int64, loc *time.Location, years, months, days int) int64 {
	lt := time.Unix(t, 0).In(loc)
	start := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	if months > 0 {
		start = time.Date(lt.Year(), lt.Month(), 1, 0, 0, 0, 0, loc)
	}
	if start.Unix() == t {
		return t
	}
	return start.AddDate(years, months, days).Unix()
}
