package inbound

import (
	"errors"
	"net/http"

	resilience "github.com/ylcnfrht/resilience/core"
)

// closesConnection (adapt.Kit.ClosesConnection) reports whether the answer to err should end its
// connection: once Drain has started, and for a 503 shutting-down (the
// limiter was closed, as Drain closes it). A client that keeps its
// connection alive otherwise sends its next request to the instance that
// is leaving, and a load balancer that moved it elsewhere cannot help.
//
// Render sets "Connection: close" on such answers, so adapters that send
// its Response need nothing more. net/http then closes an HTTP/1.1
// connection after the answer, and on HTTP/2 drops the field and sends
// GOAWAY (the client finishes its streams and opens a new connection).
// An adapter that writes answers of its own (connect's errors) sets the
// field when this is true; gRPC's transport has no such field, and
// GracefulStop sends its GOAWAY.
func (m *Middleware) closesConnection(err error) bool {
	if m.draining.Load() {
		return true
	}
	if bulk, ok := err.(*resilience.ConcurrencyLimitRejectedError); ok { // no errors.As per refusal
		return bulk.Reason == resilience.ReasonShuttingDown
	}
	var bulk *resilience.ConcurrencyLimitRejectedError
	return errors.As(err, &bulk) && bulk.Reason == resilience.ReasonShuttingDown
}

// connectionClose is the value of the Connection field that net/http
// reads as "close after this response". Shared: never modified.
var connectionClose = []string{"close"}

// closeWhenDraining returns resp with "Connection: close" when the answer
// to err should end its connection (ClosesConnection), unless a Render
// hook set the field itself. The header is copied: responses share theirs.
func (m *Middleware) closeWhenDraining(err error, resp Response) Response {
	if _, set := resp.Header["Connection"]; set || !m.closesConnection(err) {
		return resp
	}
	h := make(http.Header, len(resp.Header)+1)
	for k, v := range resp.Header {
		h[k] = v
	}
	h["Connection"] = connectionClose
	resp.Header = h
	return resp
}
