package fairshare

import (
	"cmp"
	"math"
	"slices"
)

// sharedScenario is Recovery's: every association at the larger of its
// rate and its running jobs' billing, as Quiet has the others.
type sharedScenario struct {
	f       *Forecast
	last    float64   // the last pass at or before At
	subRate []float64 // rates summed over subtrees
	// steps are every association's running jobs above its rate
	// (Forecast.committed); sub[k] those of k's subtree, by index
	steps []RateStep
	sub   [][]int32
	// memo keeps the steps' usage of associations with many of them
	// (root, accounts), which every user below asks for at the same
	// samples, by pass from last on (NaN: not yet)
	memo [][]float64
	// sums are the steps of the subtrees memo keeps, in closed form
	sums []*stepSums
	// subBrk are subBreaks by association (nil: not yet), up to endPass
	subBrk  [][]float64
	endPass float64
	// blocks are blockRange's, by association
	blocks [][][2]float64
	// pairs are the comparisons of sibling accounts without δ
	pairs map[[2]int32]*pairRuns
	// starts are the runs of samples between breaks
	starts []int
	// ownDelta keeps the current user's δ by pass, where ownGen is gen
	ownDelta []float64
	ownGen   []int32
	gen      int32
	// breaks are the passes where a step's closed form changes
	breaks []float64
	// moments by pass from last on (q 0: not yet)
	moments []moment
}

// subBreaks are stepBreaks of the steps of k's subtree.
func (s *sharedScenario) subBreaks(k int32) []float64 {
	if len(s.sub[k]) == 0 {
		return nil
	}
	if s.subBrk[k] == nil {
		steps := make([]RateStep, len(s.sub[k]))
		for n, x := range s.sub[k] {
			steps[n] = s.steps[x]
		}
		s.subBrk[k] = s.stepBreaks(steps, s.endPass)
	}
	return s.subBrk[k]
}

// stepBreaks are the passes after last up to endPass where one of steps
// starts or ends being charged (its partial intervals on either side).
func (s *sharedScenario) stepBreaks(steps []RateStep, endPass float64) []float64 {
	p := s.f.Passes
	out := []float64{}
	add := func(q float64) {
		if q > s.last && q <= endPass {
			out = append(out, q)
		}
	}
	for _, st := range steps {
		add(p.LastPass(st.From) + p.Period)
		if !math.IsInf(st.To, 1) {
			add(p.LastPass(st.To))
			add(p.LastPass(st.To) + p.Period)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stepUsage is what the steps of k's subtree add to its usage at m.
func (s *sharedScenario) stepUsage(k int32, m *moment) float64 {
	if len(s.sub[k]) == 0 {
		return 0
	}
	if s.f.Tree.isUser(k) || m.idx < 0 || m.idx >= len(s.moments) {
		return s.stepSum(k, m)
	}
	memo := s.memo[k]
	if memo == nil {
		memo = make([]float64, len(s.moments))
		for n := range memo {
			memo[n] = math.NaN()
		}
		s.memo[k] = memo
	}
	if v := memo[m.idx]; !math.IsNaN(v) {
		return v
	}
	v := s.stepSum(k, m)
	memo[m.idx] = v
	return v
}

// stepSums are the steps of a subtree in closed form at a pass q: a
// step that ended at or before q (To <= q) is some W·d^(q−last), summed
// over the steps by end (prefix sums); one still charged at q is its
// rate times a unit rate's usage from its From (Passes.BucketUsage, the
// moment's unit from last), summed by From over the steps by end
// (suffix sums).
type stepSums struct {
	ends []float64 // To, sorted
	done []float64 // done[n]: W summed over ends[:n]
	from []fromSums
}

type fromSums struct {
	from float64
	ends []float64 // To of the steps from from, sorted
	rate []float64 // rate[n]: rates summed over ends[n:]
}

func (s *sharedScenario) stepSum(k int32, m *moment) float64 {
	p := s.f.Passes
	q := m.pass
	ss := s.sums[k]
	if ss == nil {
		ss = &stepSums{}
		type st struct{ from, to, rate, w float64 }
		var all []st
		for _, n := range s.sub[k] {
			x := s.steps[n]
			from := math.Max(x.From, s.last)
			w := 0.0
			if !math.IsInf(x.To, 1) && x.To > from {
				r := p.LastPass(x.To) + p.Period
				w = x.Rate * p.BucketUsage(from, x.To, r, x.To-from) / p.pow(r-s.last)
			}
			all = append(all, st{from, x.To, x.Rate, w})
		}
		slices.SortFunc(all, func(a, b st) int { return cmp.Compare(a.to, b.to) })
		ss.done = make([]float64, len(all)+1)
		byFrom := map[float64]*fromSums{}
		for n, x := range all {
			ss.ends = append(ss.ends, x.to)
			ss.done[n+1] = ss.done[n] + x.w
			g := byFrom[x.from]
			if g == nil {
				g = &fromSums{from: x.from}
				byFrom[x.from] = g
			}
			g.ends = append(g.ends, x.to)
			g.rate = append(g.rate, x.rate)
		}
		for _, g := range byFrom {
			g.rate = append(g.rate, 0)
			for n := len(g.rate) - 2; n >= 0; n-- {
				g.rate[n] += g.rate[n+1]
			}
			ss.from = append(ss.from, *g)
		}
		slices.SortFunc(ss.from, func(a, b fromSums) int { return cmp.Compare(a.from, b.from) })
		s.sums[k] = ss
	}
	// ended: To <= q
	n, _ := slices.BinarySearchFunc(ss.ends, q, func(e, q float64) int {
		if e <= q {
			return -1
		}
		return 1
	})
	v := ss.done[n] * m.decay
	for _, g := range ss.from {
		if g.from >= q {
			break
		}
		n, _ := slices.BinarySearchFunc(g.ends, q, func(e, q float64) int {
			if e <= q {
				return -1
			}
			return 1
		})
		switch r := g.rate[n]; {
		case r == 0:
		case g.from == s.last:
			v += r * m.unit
		default:
			v += r * p.BucketUsage(g.from, q, q, q-g.from)
		}
	}
	return v
}

// moment is the shared scenario at q: association k's usage is
// raw·decay + subRate·unit + its steps'; pass is the last pass at or
// before q, idx its index from last.
type moment struct {
	q, pass, decay, unit float64
	idx                  int
}

func (s *sharedScenario) at(q float64) moment {
	p := s.f.Passes
	q = math.Max(q, s.last)
	// decay and unit are those of the last pass at or before q, the
	// same for every association and user: kept for each pass
	pass := p.LastPass(q)
	k := int(math.Round((pass - s.last) / p.Period))
	if k < len(s.moments) {
		if m := s.moments[k]; m.q != 0 {
			m.q = q
			return m
		}
	}
	m := moment{q, pass, p.pow(pass - s.last), p.BucketUsage(s.last, q, q, q-s.last), k}
	if k < len(s.moments) {
		s.moments[k] = m
	}
	return m
}

func (s *sharedScenario) usage(k int32, m *moment) float64 {
	v := s.f.Tree.raw[k]*m.decay + s.subRate[k]*m.unit
	if len(s.sub[k]) == 0 {
		return v
	}
	return v + s.stepUsage(k, m)
}

// recoveryUser is user i under Quiet(i) against the shared scenario.
type recoveryUser struct {
	s    *sharedScenario
	i    int32
	jobs []RunningJob
	// horizon is the last pass looked at
	horizon float64
	// breaks are the passes after At up to the horizon's where δ's
	// closed form may change: the first charge, and each job's first
	// charge and its end (a partial interval on either side).
	breaks []float64
	// own are those of breaks that are not the shared scenario's
	own []float64
}

func (s *sharedScenario) user(i int32, jobs []RunningJob, endPass float64) *recoveryUser {
	p := s.f.Passes
	u := &recoveryUser{s: s, i: i, jobs: jobs, horizon: endPass}
	if s.ownDelta == nil {
		s.ownDelta, s.ownGen = make([]float64, len(s.moments)), make([]int32, len(s.moments))
	}
	s.gen++
	add := func(q float64) {
		if q > s.last && q <= endPass {
			u.breaks = append(u.breaks, q)
		}
	}
	add(s.last + p.Period)
	for _, j := range jobs {
		add(p.LastPass(j.Start) + p.Period)
		if !math.IsInf(j.End, 1) {
			add(p.LastPass(j.End))
			add(p.LastPass(j.End) + p.Period)
		}
	}
	slices.Sort(u.breaks)
	u.breaks = slices.Compact(u.breaks)
	u.own = u.breaks
	u.breaks = slices.Concat(u.own, s.breaks)
	slices.Sort(u.breaks)
	u.breaks = slices.Compact(u.breaks)
	return u
}

// delta is δ at m: i's running jobs' charge less its rate's and its
// steps'.
func (u *recoveryUser) delta(m moment) float64 {
	s := u.s
	idx := m.idx
	cached := idx >= 0 && idx < len(s.moments) && (len(u.jobs) > 0 || len(s.sub[u.i]) > 0)
	if cached && s.ownGen[idx] == s.gen {
		return s.ownDelta[idx]
	}
	d := -s.subRate[u.i]*m.unit - s.stepUsage(u.i, &m)
	for _, j := range u.jobs {
		d += s.f.jobUsage(j, s.last, m.q)
	}
	if cached {
		s.ownGen[idx], s.ownDelta[idx] = s.gen, d
	}
	return d
}
