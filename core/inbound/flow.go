package inbound

import "context"

// ranksQueued reports whether a limiter with these ranking functions
// reads the request view for a request that must queue: a Priority or a
// Flow function (FlowWeight needs Flow). by.Header and by.ClientIP
// serve as Flow functions as they do as rate-limit keys.
func ranksQueued(priority func(context.Context) int, flow func(context.Context) string) bool {
	return priority != nil || flow != nil
}
