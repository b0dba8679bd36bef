package adapt

import "github.com/ylcnfrht/resilience/core/inbound/internal/kit"

// The messages of the default rejection bodies, for an adapter whose
// protocol has an error format of its own (connect, gRPC) to say the
// same as the JSON bodies of the HTTP adapters.
const (
	MessageCapacity     = kit.MessageCapacity
	MessageShuttingDown = kit.MessageShuttingDown
	MessageTimeout      = kit.MessageTimeout
	MessageRateLimited  = kit.MessageRateLimited
	MessageRejected     = kit.MessageRejected
	MessageInternal     = kit.MessageInternal
)
