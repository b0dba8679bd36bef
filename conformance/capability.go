package conformance

// Capability names something an adapter's framework may be unable to do.
// An adapter that lacks one lists it in Harness.Missing with the reason;
// the cases that need it then run their pinned variant instead of the
// full one, so the documented gap is still tested and cannot widen
// silently. An unknown capability in Harness.Missing fails the run.
type Capability string

const (
	// CapDisconnect: the framework cancels the request's context when the
	// client closes the connection, so a queued request leaves the queue
	// and a running one is told to stop. (fasthttp cannot observe a closed
	// connection while a handler runs.)
	CapDisconnect Capability = "disconnect"

	// CapStreaming: a handler's flush reaches the client through the
	// middleware at once (server-sent events), and a deadline that fires
	// after the response was committed aborts the connection. (A framework
	// that buffers converted net/http handlers cannot.)
	CapStreaming Capability = "streaming"

	// CapRoute: the middleware can know, before the framework routes the
	// request, the route pattern it will match, so inbound.Request.Route
	// reports it to priority and key functions. (A framework whose
	// middleware runs before routing and that offers no lookup cannot.)
	CapRoute Capability = "route"

	// CapAbortHandler: a handler that panics with http.ErrAbortHandler
	// aborts the connection without a response, as in net/http.
	CapAbortHandler Capability = "abort-handler"

	// CapOnTime504: a complete 504 reaches the client at the deadline even
	// when the handler ignores its context and runs on. (A framework that
	// sends the response only when its handler returns, and recycles the
	// handler's request object then, cannot from its middleware alone:
	// fiber without its adapter's fasthttp wrapper.)
	CapOnTime504 Capability = "on-time-504"

	// CapShutdownRetryAfter: a 503 shutting-down carries Retry-After, as
	// the other capacity 503s do. (An RPC adapter may instead tell its
	// clients not to retry on this instance: connect sends
	// grpc-retry-pushback-ms -1 and no Retry-After.)
	CapShutdownRetryAfter Capability = "shutdown-retry-after"

	// CapHTTP2: the server speaks HTTP/2 without TLS (h2c, prior
	// knowledge), as NewHTTPServer's does. (fasthttp speaks HTTP/1 only.)
	CapHTTP2 Capability = "http2"

	// CapCloseOnShutdown: a 503 shutting-down carries Connection: close
	// and the server closes the HTTP/1.1 connection after it. (A protocol
	// with its own way to move clients off a leaving server, gRPC with
	// GracefulStop's GOAWAY, has no such field.)
	CapCloseOnShutdown Capability = "close-on-shutdown"
)

// Capabilities returns every capability the suite knows, in a stable order,
// each with what it means. Docs print it next to Cases.
func Capabilities() []CapabilityInfo {
	return []CapabilityInfo{
		{CapDisconnect, "the request's context is cancelled when the client disconnects"},
		{CapStreaming, "a handler's flush reaches the client through the middleware; a deadline after the commit aborts the connection"},
		{CapAbortHandler, "panic(http.ErrAbortHandler) aborts the connection without a response"},
		{CapRoute, "inbound.Request.Route reports the route pattern to priority and key functions"},
		{CapOnTime504, "a complete 504 reaches the client at the deadline while a handler that ignores its context runs on"},
		{CapShutdownRetryAfter, "a 503 shutting-down carries Retry-After like the other capacity 503s"},
		{CapHTTP2, "the server speaks HTTP/2 without TLS (h2c, prior knowledge)"},
		{CapCloseOnShutdown, "a 503 shutting-down carries Connection: close and the HTTP/1.1 connection is closed after it"},
	}
}

// CapabilityInfo describes a Capability for documentation, as
// Capabilities lists them.
type CapabilityInfo struct {
	Capability  Capability
	Description string
}

func knownCapability(c Capability) bool {
	for _, ci := range Capabilities() {
		if ci.Capability == c {
			return true
		}
	}
	return false
}
