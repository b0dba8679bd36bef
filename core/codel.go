package resilience

import "time"

// CoDelOptions turns on the CoDel queue discipline of a concurrency limiter
// (fixed or adaptive), after "Fail at Scale" (Facebook, ACM Queue 2015).
//
// A queue exists to absorb bursts. Under sustained overload it fills and
// stays full, and then every admitted execution first waits a whole
// queue's worth: with a queue as long as the permit limit, admitted latency
// doubles while throughput does not improve at all. CoDel tells the two
// apart by one signal: whether the queue has been empty at some point in
// the last Interval. If it has, the queue is absorbing a burst and behaves
// as configured. If it has not, the queue is standing, and it stays
// standing until a whole Interval passes in which the limiter shed nothing
// (so a queue that empties now and then under sustained overload does not
// go back to long waits); for 16 intervals after that, a queue non-empty
// for Target is standing again. While it stands,
//
//   - an execution that must queue gets Target as its queue timeout (if
//     that is shorter than QueueTimeout);
//   - a waiter that has already waited longer than Target is rejected with
//     ReasonQueueTimeout at the next queue operation instead of being
//     granted late, so the standing queue drains at once;
//   - with AdaptiveLIFO, freed permits go to the newest waiter of the best
//     priority, whose client is the most likely to still be waiting.
//
// Priorities still apply: a standing queue grants the best priority first,
// and while several priorities wait it sheds the others first: waiters of
// the best priority queued keep their configured queue timeout and are not
// rejected for waiting past Target until they wait alone, so a service
// whose permits free in bursts still serves its most important class in
// full while CoDel drains the rest.
//
// Flows (a Flow function) are spared the same way within the best
// priority: CoDel's drops land on the flows over their share, never on a
// flow under it. A waiter whose flow holds, with its own waiters ahead of
// it and itself, fewer than its share of the permits (the limit times its
// FlowWeight over the active flows' weights) keeps its queue timeout and
// is not rejected for waiting past Target: fewest permits held first
// grants it before any waiter of a flow at or over its share, so it waits
// only for the next permit to free. So does a waiter whose flow asks for
// well less than the heaviest flow (under half as many of the recent
// requests that had to queue, per unit of FlowWeight) and none of whose
// waiters was shed within the last Interval, so that a quiet tenant is
// served in full even when permits free in bursts farther apart than
// Target and its requests pile up between them. The first test needs no
// history, and holds for clients of every kind: a worker pool that sends
// its next request when the last one ends, and re-sends at once after a
// rejection, is never idle long enough to build one. A flow that had a
// waiter shed within the last Interval while it used more than its share
// is not spared by it: when every flow asks for more than its share, the
// queue stays as short as without flows.
//
// Use it when a queue is configured (QueueLimit > 0) and overload can last
// longer than a burst, which is the usual case for an inbound limiter. It
// costs nothing on the fast path (a free permit); queued executions read the
// clock once more. Leave it off for queues whose waits are meant to be long
// (a batch job waiting its turn), where a standing queue is the intent.
//
// The zero value of each field means its default.
type CoDelOptions struct {
	// Interval is how long the queue must have been non-empty before it
	// counts as standing; 0 means 100 ms.
	Interval time.Duration
	// Target is the queue timeout while the queue is standing; 0 means
	// 5 ms.
	Target time.Duration
	// AdaptiveLIFO grants the newest waiter (of the best priority) while the
	// queue is standing, instead of the oldest.
	AdaptiveLIFO bool
}

func validateCoDel(typeName string, o *CoDelOptions) error {
	if o == nil {
		return nil
	}
	if err := checkNonNegativeDuration(typeName+".CoDel.Interval", o.Interval); err != nil {
		return err
	}
	return checkNonNegativeDuration(typeName+".CoDel.Target", o.Target)
}
