package inbound

import "net/http"

// RenderServe is Render for a rejection Serve returned, with w and r as
// passed to Serve. It differs when the request's context ended while it
// was queued, where Render has nothing to send: a client still there,
// whose context the server ended (a BaseContext cancelled at shutdown),
// gets the 503 shutting-down; a client that left gets nothing, and ok is
// false: the adapter then drops the connection with nothing written
// (panic(http.ErrAbortHandler) once the framework's state is restored), as
// Handler does, rather than let net/http send an implicit empty 200.
func (m *Middleware) RenderServe(w http.ResponseWriter, r *http.Request, err error) (Response, bool) {
	if resp, ok := m.Render(err); ok {
		return resp, true
	}
	if clientGone(w) {
		return Response{}, false
	}
	resp, _ := m.Render(errShuttingDown)
	return resp, true
}
