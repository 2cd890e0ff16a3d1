package fairshare

import (
	"cmp"
	"math"
	"slices"
)

// FairTree computes the Fair Tree values (the default since Slurm 19.05) of
// every association, in the order given to NewTree, as sshare shows them:
// NormShares among siblings, EffectvUsage against the fs parent, LevelFS =
// NormShares/EffectvUsage, and FairShare = rank/users for user rows only.
// Blank (NaN) where sshare prints nothing: root's NormUsage, LevelFS and
// FairShare, accounts' FairShare, and LevelFS of FairShare=parent rows.
func (t *Tree) FairTree() []Values {
	out, level := t.fairTreeLevels(t.raw)
	t.rankFairTree(out, level)
	return out
}

// fairTreeLevels is FairTree before the ranking, with usage raw (indexed
// like t): the values, and level, _calc_assoc_fs's level_fs, which ranks
// but is not always printed.
func (t *Tree) fairTreeLevels(raw []float64) (out []Values, level []float64) {
	n := len(t.raw)
	out = make([]Values, n)
	level = make([]float64, n)
	rootRaw := raw[t.root]
	for i := range out {
		v := &out[i]
		v.RawUsage = raw[i]
		v.NormUsage = normUsage(raw[i], rootRaw)
		v.FairShare = blank
		v.LevelFS = blank
		if int32(i) == t.root {
			// root's level_shares stays NO_VAL; priority_multifactor.c init
			// sets its usage_efctv to 1.
			v.NormShares = t.shares[i] / noVal
			v.NormUsage, v.EffectiveUsage = blank, 1
			level[i] = noVal
			continue
		}
		p := t.fsParent[i]
		// _normalize_assoc_shares_fair_tree: a FairShare=parent row shows
		// its fs parent's sibling share.
		f := int32(i)
		if t.usesParent(f) {
			f = p
		}
		if f != t.root && t.levelShares[f] != 0 {
			v.NormShares = t.shares[f] / t.levelShares[f]
		} else if f == t.root {
			v.NormShares = t.shares[f] / noVal
		}
		// _ft_set_assoc_usage_efctv
		if raw[p] != 0 {
			v.EffectiveUsage = raw[i] / raw[p]
		}
		level[i] = t.levelFS(int32(i), v.NormShares, raw[i], raw[p])
		if !t.usesParent(int32(i)) {
			v.LevelFS = level[i]
		}
	}
	return out, level
}

// levelFS is _calc_assoc_fs's level_fs of association i (not root) with
// NormShares ns, usage raw and its fs parent's usage rawP.
func (t *Tree) levelFS(i int32, ns, raw, rawP float64) float64 {
	switch {
	case t.kind[i] == kindParent|kindUser:
		return math.Inf(1)
	case t.kind[i] == kindParent:
		return noVal
	case ns == 0:
		return 0
	}
	ue := 0.0 // _ft_set_assoc_usage_efctv
	if rawP != 0 {
		ue = raw / rawP
	}
	return ns / ue // +Inf at zero usage, as in Slurm
}

// rankFairTree is _apply_priority_fs/_calc_tree_fs (fair_tree.c): a
// depth-first walk over siblings sorted by level_fs, higher first and users
// before accounts on exact ties, ranking users from the number of users
// down. A user tied with the previous sibling keeps the previous rank, and
// an account tied with the previous sibling passes the tie to its first
// child. Tied sibling accounts are not merged, whatever fair_tree.c's
// comments and the Fair Tree announcement say: _count_tied_accounts stops at
// the first account it meets, so it always returns 0.
func (t *Tree) rankFairTree(out []Values, level []float64) {
	sorted := slices.Clone(t.kids)
	users := int32(t.users)
	rank, rnt := users, users
	byLevel := func(x, y int32) int {
		if c := cmp.Compare(level[y], level[x]); c != 0 {
			return c
		}
		return int(t.kind[y]&kindUser) - int(t.kind[x]&kindUser)
	}
	// ranked lists users in the order they get their rank, so that a run
	// of tied accounts can widen its users' rank range afterwards.
	ranked := make([]int32, 0, users)
	var walk func(p int32, accountTied bool)
	walk = func(p int32, accountTied bool) {
		sib := sorted[t.kidStart[p]:t.kidStart[p+1]]
		// glibc's qsort (a merge sort in bookworm's 2.36) keeps equal
		// elements in children_list order; a stable sort does the same.
		slices.SortStableFunc(sib, byLevel)
		prev := noVal
		runEnd := -1 // last index of the current run of tied accounts
		var runHi int32
		var runFirst int
		for k, c := range sib {
			tied := prev == level[c]
			if k == 0 && accountTied {
				tied = true
			}
			if k > runEnd && !t.isUser(c) {
				// A run of accounts tied with each other: whichever comes
				// first starts with this one's tie state.
				runEnd = k
				for runEnd+1 < len(sib) && !t.isUser(sib[runEnd+1]) && level[sib[runEnd+1]] == level[c] {
					runEnd++
				}
				runHi, runFirst = rnt, len(ranked)
				if tied {
					runHi = rank
				}
			}
			if t.isUser(c) {
				if !tied {
					rank = rnt
				}
				out[c].Rank, out[c].RankMin, out[c].RankMax = rank, rank, rank
				out[c].FairShare = float64(rank) / float64(users)
				ranked = append(ranked, c)
				rnt--
			} else {
				walk(c, tied)
			}
			if k == runEnd && k > 0 && !t.isUser(sib[k-1]) && level[sib[k-1]] == level[c] {
				for _, u := range ranked[runFirst:] {
					out[u].RankMin = min(out[u].RankMin, rnt+1)
					out[u].RankMax = max(out[u].RankMax, runHi)
				}
			}
			prev = level[c]
		}
	}
	walk(t.root, false)
}

// RankIntervals widens each user's Fair Tree rank range (Values.RankMin,
// RankMax) by the error of every LevelFS (lfsErr, e.g. UsageBounds'):
// along the user's path, a sibling whose LevelFS is surely higher puts
// all its users before this one, a sibling whose interval overlaps may or
// may not. The count of users before gives the rank, so the range runs
// from users − (surely and maybe before) to users − (surely before).
// Exact ties keep their own range (RankMin/RankMax), which is included.
func (t *Tree) RankIntervals(vals []Values, lfsErr []float64) (lo, hi []int32) {
	n := len(t.assocs)
	count := t.walkUsers()
	low, high := make([]float64, n), make([]float64, n)
	for i := range n {
		l, e := vals[i].LevelFS, lfsErr[i]
		// the level rankFairTree sorts by, where sshare prints none
		switch t.kind[i] {
		case kindParent | kindUser:
			l, e = math.Inf(1), 0
		case kindParent:
			l, e = noVal, 0
		}
		if math.IsNaN(e) || math.IsInf(e, 1) || math.IsNaN(l) {
			low[i], high[i] = math.Inf(-1), math.Inf(1)
			continue
		}
		low[i], high[i] = l-e, l+e
	}
	surely, maybe := make([]int32, n), make([]int32, n) // users before, accumulated down the path
	var byLow, byHigh, exact []rankEdge
	var sumLow, sumHigh, sumExact []int32 // scratch, as above: reused by every sibling group, where a set per group would be most of a comparison's allocations
	for _, p := range t.order {
		sib := t.kids[t.kidStart[p]:t.kidStart[p+1]]
		if len(sib) == 0 {
			continue
		}
		// prefix sums of users over siblings sorted by each end; exact
		// are the siblings whose LevelFS is known exactly: two of them
		// with one value are a tie, which RankMin/RankMax already hold
		byLow, byHigh, exact = byLow[:0], byHigh[:0], exact[:0]
		for _, c := range sib {
			byLow = append(byLow, rankEdge{low[c], count[c]})
			byHigh = append(byHigh, rankEdge{high[c], count[c]})
			if low[c] == high[c] {
				exact = append(exact, rankEdge{low[c], count[c]})
			}
		}
		byValue := func(x, y rankEdge) int { return cmp.Compare(x.v, y.v) }
		slices.SortFunc(byLow, byValue)
		slices.SortFunc(byHigh, byValue)
		slices.SortFunc(exact, byValue)
		sumLow, sumHigh, sumExact = suffixUsers(sumLow, byLow), suffixUsers(sumHigh, byHigh), suffixUsers(sumExact, exact)
		for _, c := range sib {
			// siblings whose whole interval lies above c's
			s := sumLow[firstAbove(byLow, high[c])]
			// siblings that may come first: an interval reaching c's,
			// but for exact ties, and c itself
			m := sumHigh[firstAtLeast(byHigh, low[c])]
			m -= sumExact[firstAtLeast(exact, low[c])] - sumExact[firstAbove(exact, low[c])]
			if low[c] != high[c] {
				m -= count[c]
			}
			surely[c], maybe[c] = surely[p]+s, maybe[p]+m
		}
	}
	lo, hi = make([]int32, n), make([]int32, n)
	users := int32(t.users)
	for i := range n {
		if !t.isUser(int32(i)) {
			continue
		}
		lo[i] = min(vals[i].RankMin, vals[i].Rank, users-maybe[i])
		hi[i] = max(vals[i].RankMax, vals[i].Rank, users-surely[i])
	}
	return lo, hi
}

// rankEdge is one end of a sibling's LevelFS interval and its users.
type rankEdge struct {
	v     float64
	users int32
}

// firstAbove is the first index of sorted whose value is above v.
func firstAbove(sorted []rankEdge, v float64) int {
	k, _ := slices.BinarySearchFunc(sorted, v, func(e rankEdge, v float64) int {
		if e.v <= v {
			return -1
		}
		return 1
	})
	return k
}

// firstAtLeast is the first index of sorted whose value is v or above.
func firstAtLeast(sorted []rankEdge, v float64) int {
	k, _ := slices.BinarySearchFunc(sorted, v, func(e rankEdge, v float64) int {
		if e.v < v {
			return -1
		}
		return 1
	})
	return k
}

// suffixUsers is, for each k, the users of sorted[k:], in s's memory.
func suffixUsers(s []int32, sorted []rankEdge) []int32 {
	s = append(s[:0], make([]int32, len(sorted)+1)...) // zeroed
	for k := len(sorted) - 1; k >= 0; k-- {
		s[k] = s[k+1] + sorted[k].users
	}
	return s
}

// walkUsers is the number of users in each association's subtree of the
// ranking walk (over fs parents).
func (t *Tree) walkUsers() []int32 {
	count := make([]int32, len(t.assocs))
	for k := len(t.order) - 1; k >= 0; k-- {
		i := t.order[k]
		if t.isUser(i) {
			count[i]++
		}
		if i != t.root {
			count[t.fsParent[i]] += count[i]
		}
	}
	return count
}
