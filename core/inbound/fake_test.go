package inbound

import (
	"context"
	"github.com/ylcnfrht/resilience/core/internal/route"
	"net/http"
	"sync"
)

// fakeRequest is the request object of a fake framework that is not
// built on net/http: its own request type and a response that goes out,
// whole, only when the adapter hands it to the wire (as fasthttp sends
// the response when the handler returns).
type fakeRequest struct {
	method, path, addr, route string
	header                    http.Header

	// The handler's response, written by the handler's goroutine only.
	status int
	body   []byte
}

// fakeFramework describes the fake framework to the middleware.
var fakeFramework = framework{
	View: func(raw any, v *Request) {
		r := raw.(*fakeRequest)
		v.Method, v.Path, v.RemoteAddr = r.method, r.path, r.addr
		if r.header != nil {
			v.Header = r.header
		}
	},
	Route: func(raw any) string { return route.Colon(raw.(*fakeRequest).route) },
}

// fakeWire is the client's side of one fake connection: every response
// the adapter sends on it.
type fakeWire struct {
	mu        sync.Mutex
	responses []Response
	sent      chan struct{} // closed at the first response
}

func newFakeWire() *fakeWire { return &fakeWire{sent: make(chan struct{})} }

func (w *fakeWire) send(r Response) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.responses = append(w.responses, r)
	if len(w.responses) == 1 {
		close(w.sent)
	}
}

func (w *fakeWire) all() []Response {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Response(nil), w.responses...)
}

// keyByClientIP and keyByHeader are by.ClientIP and by.Header, which this
// package's tests cannot import (package by imports inbound).
func keyByClientIP(ctx context.Context) string {
	r, _ := RequestFrom(ctx)
	return r.ClientKey()
}

func keyByHeader(name string) func(ctx context.Context) string {
	return func(ctx context.Context) string {
		if r, ok := RequestFrom(ctx); ok && r.Header != nil {
			return r.Header.Get(name)
		}
		return ""
	}
}
