package inbound

import (
	"github.com/ylcnfrht/resilience/core/retryafter"
	"net/http"
	"time"
)

// DefaultRetryAfter is the Retry-After of a 503 when Options.RetryAfter
// is 0. A queue is short by design, so a second is long enough for it to
// drain and short enough not to idle the server; the connect adapter's
// RetryInfo and grpc-retry-pushback-ms say the same second.
const DefaultRetryAfter = time.Second

// capacityRetryAfter is adapt.Kit.CapacityRetryAfter: Options.RetryAfter
// resolved (DefaultRetryAfter for 0, no advice for a negative value).
func (m *Middleware) capacityRetryAfter() time.Duration {
	switch d := m.opts.RetryAfter; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultRetryAfter
	default:
		return d
	}
}

// capacityResponses are the 503s of one middleware, rendered once at New
// with its Retry-After: a rejection still costs no marshalling.
type capacityResponses struct {
	full, queueTimeout, dropped, shuttingDown, rejected Response
}

// retryAfterValue resolves Options.RetryAfter to the field's value, or
// nil for none.
func retryAfterValue(d time.Duration) []string {
	switch {
	case d < 0:
		return nil
	case d == 0:
		d = DefaultRetryAfter
	}
	return []string{retryafter.Format(d)}
}

func newCapacityResponses(retryAfter time.Duration) capacityResponses {
	h := jsonHeader
	if v := retryAfterValue(retryAfter); v != nil {
		h = http.Header{"Content-Type": jsonHeader["Content-Type"], hdrRetryAfter: v}
	}
	with := func(r Response) Response { r.Header = h; return r }
	return capacityResponses{
		full:         with(respFull),
		queueTimeout: with(respQueueTimeout),
		dropped:      with(respDropped),
		shuttingDown: with(respShuttingDown),
		rejected:     with(respRejected),
	}
}
