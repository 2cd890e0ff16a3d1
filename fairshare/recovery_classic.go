package fairshare

import (
	"math"
	"slices"
)

// skipBlock is how many samples classicSkip bounds together.
const skipBlock = 16

// classicSkip bounds user u's classic factor over blocks of samples: the
// usage of each association on its path and of root between its lowest
// and highest at the block's samples (kept per association, shared by
// every user), u's own usage and δ between their values at the block's
// ends and at u's breaks inside (they are monotone between those), each
// normalized usage between the lowest over the highest and back, and the
// effective usage, monotone in each, between the two. A block whose
// bounds stay on the starting side of thr (with a margin for rounding)
// has no sample that crosses.
func (s *sharedScenario) classicSkip(u *recoveryUser, samples []float64, now []Values, thr float64, ue []float64) func(a, b int, rising bool) bool {
	t := s.f.Tree
	damp := s.f.Dampening
	if damp <= 0 {
		damp = 1
	}
	nb := (len(samples) - 1 + skipBlock - 1) / skipBlock
	cb := &classicBlocks{s: s, u: u, samples: samples, now: now, thr: thr, damp: damp,
		brk:   mergeSorted(u.own, s.subBreaks(u.i)),
		state: [2][]uint8{make([]uint8, nb), make([]uint8, nb)},
		uLo:   map[int32]float64{},
		uHi:   map[int32]float64{},
		ueLo:  ue,
		ueHi:  make([]float64, t.Len()),
	}
	for d := u.i; d >= 0; d = t.parent[d] {
		cb.path = append(cb.path, d)
	}
	return cb.skip
}

// classicBlocks is classicSkip's bounds of one user's classic factor,
// block by block.
type classicBlocks struct {
	s         *sharedScenario
	u         *recoveryUser
	samples   []float64
	now       []Values
	thr, damp float64
	// brk are u's own breaks and its subtree's steps'
	brk []float64
	// per block: 0 not yet, 1 may cross, 2 none crosses; by side
	state [2][]uint8
	// path is u's, up to root
	path []int32
	// the bounds of the block at hand: usage and effective usage by
	// association on the path
	uLo, uHi   map[int32]float64
	ueLo, ueHi []float64
}

// skip says whether no sample from a to b crosses on the given side,
// bounding each block they touch once.
func (cb *classicBlocks) skip(a, b int, rising bool) bool {
	side := 0
	if rising {
		side = 1
	}
	state := cb.state[side]
	for blk := (a - 1) / skipBlock; blk <= (b-1)/skipBlock; blk++ {
		if state[blk] == 0 {
			state[blk] = 1
			if cb.bound(blk, rising) {
				state[blk] = 2
			}
		}
		if state[blk] != 2 {
			return false
		}
	}
	return true
}

// span is a running lowest and highest.
type span struct{ lo, hi float64 }

func emptySpan() span { return span{math.Inf(1), math.Inf(-1)} }

func (r *span) add(v float64) { r.lo, r.hi = math.Min(r.lo, v), math.Max(r.hi, v) }

// bound says whether the factor stays on its starting side at every
// sample of block blk.
func (cb *classicBlocks) bound(blk int, rising bool) bool {
	s, t, u := cb.s, cb.s.f.Tree, cb.u
	x, d := cb.ownSpan(blk)
	for _, k := range cb.path {
		if k == u.i {
			cb.uLo[k], cb.uHi[k] = x.lo, x.hi
			continue
		}
		l, h := s.blockRange(k, blk, cb.samples)
		cb.uLo[k], cb.uHi[k] = l+d.lo, h+d.hi
	}
	if !cb.effectiveSpan(x.lo) {
		return false
	}
	f := u.i
	if t.usesParent(u.i) {
		f = t.fsParent[u.i]
	}
	fLo := ClassicFactor(cb.ueHi[f]*(1+1e-9), cb.now[f].NormShares, cb.damp)
	fHi := ClassicFactor(cb.ueLo[f]*(1-1e-9), cb.now[f].NormShares, cb.damp)
	if rising {
		return fHi < cb.thr*(1-1e-9)
	}
	return fLo >= cb.thr*(1+1e-9)
}

// ownSpan bounds u's own usage plus δ (x), and δ (d), over block blk:
// their values at the block's ends and at u's breaks inside, and the
// pass before each break.
func (cb *classicBlocks) ownSpan(blk int) (x, d span) {
	s, u, p := cb.s, cb.u, cb.s.f.Passes
	a := 1 + blk*skipBlock
	b := min(a+skipBlock, len(cb.samples)) - 1
	qa, qb := p.LastPass(cb.samples[a]), p.LastPass(cb.samples[b])
	x, d = emptySpan(), emptySpan()
	point := func(q float64) {
		m := s.at(q)
		dq := u.delta(m)
		xq := s.usage(u.i, &m) + dq
		x.add(xq)
		d.add(dq)
	}
	point(qa)
	point(qb)
	brk := cb.brk
	k, _ := slices.BinarySearch(brk, qa)
	for ; k < len(brk) && brk[k] <= qb; k++ {
		point(brk[k])
		if brk[k]-p.Period >= qa {
			point(brk[k] - p.Period)
		}
	}
	return x, d
}

// effectiveSpan bounds the effective usage of each association on the
// path from root down, from uLo and uHi (xLo is u's lowest usage): false
// where the bounds do not hold (root's usage not above 0, u's below 0,
// or a weight outside [0,1], where it is not monotone in both).
func (cb *classicBlocks) effectiveSpan(xLo float64) bool {
	t := cb.s.f.Tree
	rLo, rHi := cb.uLo[t.root], cb.uHi[t.root]
	if !(rLo > 0) || xLo < 0 {
		return false
	}
	cb.ueLo[t.root], cb.ueHi[t.root] = 1, 1
	for k := len(cb.path) - 2; k >= 0; k-- {
		d := cb.path[k]
		if w := t.shares[d] / t.levelShares[d]; t.fsParent[d] != t.root && !t.usesParent(d) && t.levelShares[d] != 0 && !(w >= 0 && w <= 1) {
			return false // not monotone in both
		}
		nLo, nHi := normUsage(math.Max(cb.uLo[d], 0), rHi), normUsage(cb.uHi[d], rLo)
		cb.ueLo[d] = t.effectiveUsage(d, nLo, cb.ueLo[t.fsParent[d]])
		cb.ueHi[d] = t.effectiveUsage(d, nHi, cb.ueHi[t.fsParent[d]])
	}
	return true
}

// blockRange is the lowest and highest usage of association d at the
// samples of block blk (classicSkip), kept.
func (s *sharedScenario) blockRange(d int32, blk int, samples []float64) (float64, float64) {
	if s.blocks == nil {
		s.blocks = make([][][2]float64, s.f.Tree.Len())
	}
	r := s.blocks[d]
	if r == nil {
		nb := (len(samples) - 1 + skipBlock - 1) / skipBlock
		r = make([][2]float64, nb)
		for n := range r {
			r[n] = [2]float64{math.Inf(1), math.Inf(-1)}
		}
		for j := 1; j < len(samples); j++ {
			m := s.at(s.f.Passes.LastPass(samples[j]))
			v := s.usage(d, &m)
			x := &r[(j-1)/skipBlock]
			x[0], x[1] = math.Min(x[0], v), math.Max(x[1], v)
		}
		s.blocks[d] = r
	}
	return r[blk][0], r[blk][1]
}
