// Package fair orders the waiters of a concurrency limiter fairly between
// flows (tenants, API keys, clients) that share one priority.
//
// The discipline is "fewest permits held first": when a permit frees, it
// goes to the waiting flow that holds the fewest permits per unit of
// weight, and among flows that hold equally many, to the one whose last
// permit is the least recent (round robin); within a flow, waiters keep
// their arrival order. A concurrency limiter shares permits, and a flow's use of that
// resource at any moment is the permits it holds, so this is max-min
// fairness of the resource itself. Its integral over time is the
// permit-time a flow has used: a flow whose requests run long holds more
// permits and waits behind the others, without the limiter reading a
// clock or keeping a usage history to bound or decay (fair queuing by
// virtual time needs both, and needs the cost of a request before it
// runs). The round-robin tie-break makes flows that hold the same share
// take turns however deep their backlogs, so no waiting flow is starved:
// once the permits it held have finished, it is granted before any flow
// gets a second turn.
//
// A request that costs more than one permit (HoldN, GrantN) counts all
// of them in its flow's permits held, so a flow running costly requests
// waits behind flows that hold less; waiters count one each.
//
// Shedding takes from the other end: the flow with the most waiters per
// unit of weight (Level.Largest).
//
// State lives only while a flow waits or holds a permit: a Flow leaves its
// Table when it has neither, so memory is bounded by the limiter's permit
// and queue limits, however many distinct keys arrive. Every operation is
// O(log F) in the number F of flows waiting at a priority, or O(1).
//
// Nothing here is safe for concurrent use: the limiter's mutex guards a
// Table and everything in it.
//
// The files follow the concepts: flow.go (the flows, a Table of them),
// rank.go (a Level's order of waiters, who gets the next permit) and
// evict.go (who is shed, who is spared), each with its diagram.
package fair
