package fairshare

import "math"

// minUsageFactor is MIN_USAGE_FACTOR of the ticket-based plugin: usage below
// 1% of the shares counts as 1%, so the factor stays finite.
const minUsageFactor = 0.01

// rootTickets is what the ticket-based plugin hands the root each cycle
// (a uint32 filled to the top).
const rootTickets = math.MaxUint32

// TicketBased computes the ticket-based fairshare of Slurm 2.5 to 14.11
// (PriorityFlags=TICKET_BASED, removed in 15.08) as a what-if view, from
// priority_multifactor.c of slurm-14-11-11-1. active[i] says association i
// has pending jobs; it and its ancestors compete for tickets. The result
// has, per association, the classic NormShares and NormUsage, the ticket
// effective usage, and FairShare = tickets/max user tickets (0 for inactive
// associations). Tickets holds the tickets themselves.
func (t *Tree) TicketBased(active []bool, dampening float64) (vals []Values, tickets []float64) {
	a := t.assocs
	n := len(a)
	vals = t.Classic(ClassicOptions{Dampening: dampening})
	tickets = make([]float64, n)
	// _mark_assoc_active: the association and its ancestors below root.
	on := make([]bool, n)
	for i := range a {
		if i < len(active) && active[i] {
			for x := int32(i); x != t.root && !on[x]; x = int32(a[x].Parent) {
				on[x] = true
			}
		}
	}
	factor := make([]float64, n)
	for _, i := range t.order[1:] {
		// _ticket_based_set_usage_efctv: a FairShare=parent row takes its
		// fs parent's shares and usage; effective usage is the normalized
		// usage, but at least 1% of the share among siblings.
		f := i
		if a[i].UsesParent() {
			f = t.fsParent[i]
			vals[i].NormShares, vals[i].NormUsage = vals[f].NormShares, vals[f].NormUsage
		}
		ue := vals[f].NormUsage
		if f != t.root && t.levelShares[f] != 0 {
			ue = math.Max(ue, minUsageFactor*float64(a[f].Shares)/t.levelShares[f])
		}
		vals[i].EffectiveUsage = ue
		// priority_p_calc_fs_factor, ticket branch.
		if sn := vals[i].NormShares; sn > 0 {
			factor[i] = sn / math.Max(ue, minUsageFactor*sn)
		}
	}
	// _distribute_tickets, top-down over children lists; tickets are a
	// uint32 in Slurm, so each share is truncated.
	maxTickets := 0.0
	var give func(p int32, have float64)
	give = func(p int32, have float64) {
		kids := t.kids[t.kidStart[p]:t.kidStart[p+1]]
		sum := 0.0
		for _, c := range kids {
			if on[c] {
				sum += vals[c].NormShares * factor[c]
			}
		}
		for _, c := range kids {
			if !on[c] {
				continue
			}
			if sum > 0 {
				tickets[c] = math.Trunc(have * vals[c].NormShares * factor[c] / sum)
			}
			if a[c].IsUser() && tickets[c] > maxTickets {
				maxTickets = tickets[c]
			}
			give(c, tickets[c])
		}
	}
	give(t.root, rootTickets)
	for i := range vals {
		vals[i].FairShare = 0
		if on[i] && maxTickets > 0 {
			vals[i].FairShare = tickets[i] / maxTickets
		}
	}
	return vals, tickets
}
