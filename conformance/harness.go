package conformance

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// HealthPath is where a harness mounts Config.Health, outside the
// middleware. The suite's own handlers never use it.
const HealthPath = "/healthz"

// Harness tells the suite how to run one adapter: fill in Start
// (required) and, when the adapter lacks something, Missing and
// KnownFailing. Run never modifies it, so one Harness may serve several
// tests as long as Start can be called repeatedly.
type Harness struct {
	// Name identifies the adapter in failure messages, e.g. "chi".
	Name string

	// Start serves cfg on a new loopback server and returns it. It must:
	//   - put the adapter's middleware, configured from cfg.Options, in
	//     front of cfg.Handler, for every method and every path except
	//     HealthPath (the suite's routes are all below "/"), with
	//     cfg.Handler also mounted at RoutePattern (in the framework's
	//     syntax) so that Request.Route can be checked;
	//   - mount cfg.Health at HealthPath (GET) outside the middleware, the
	//     way a user registers a health route before the middleware;
	//   - return the server's base URL and a way to read the middleware's
	//     live counters.
	// A framework that does not speak net/http converts the handlers (the
	// way it would mount any net/http handler). A configuration the adapter
	// rejects is returned as an error; the case then fails with it.
	Start func(cfg Config) (*Server, error)

	// Missing declares capabilities the adapter lacks, each with the reason
	// (for example "fasthttp does not report a closed client connection").
	// A case that needs a missing capability is not skipped: it runs its
	// pinned variant, which asserts what the adapter documents it does
	// instead. An unknown capability fails the run.
	Missing map[Capability]string

	// KnownFailing lists cases, by name, that fail today, each with the
	// reason (an issue link, say). Such a case still runs; it passes the run
	// while it fails and fails the run once it passes, so the list cannot go
	// stale. An unknown case name fails the run.
	KnownFailing map[string]string

	// DecodeRejection reads a rejection's body in the adapter's protocol,
	// for an adapter whose rejections are not inbound's JSON bodies (an RPC
	// protocol's own errors). Nil means DecodeJSONRejection, which checks
	// inbound's body.
	DecodeRejection RejectionDecoder
}

// Config is what Harness.Start serves. Each case builds its own. A plain
// value: the suite never changes it after passing it to Start, and its
// handlers are safe for concurrent use. Start never receives the zero
// Config; a configuration the adapter rejects is Start's error, which
// fails the case.
type Config struct {
	// Options configures the adapter's inbound middleware.
	Options inbound.Options
	// Handler serves every suite route; mount it behind the middleware.
	// It is an ordinary net/http handler; it uses http.ResponseController
	// to flush (streaming cases) and panics in the panic cases.
	Handler http.Handler
	// Health answers 200 "ok"; mount it at HealthPath before the
	// middleware.
	Health http.Handler
}

// Server is a running loopback server started by Harness.Start. Stats is
// called while the server handles requests, so it must be safe for
// concurrent use. The zero Server is incomplete: a Start that returns one
// without URL, Stats and Close fails the case. The suite calls Close once
// the case ends, whatever its outcome.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:port", without a trailing
	// slash.
	URL string
	// Stats reads the middleware's current counters (for an adapter built
	// on inbound.Middleware, its Stats method). Required: the suite waits
	// for states (a request queued, permits returned) through it rather
	// than sleeping. It reads InFlight, Queued and Limit.
	Stats func() inbound.Stats
	// Close stops the server and frees its resources. The suite calls it
	// once, after every handler it started has returned. Required.
	Close func()
}

// NewHTTPServer serves h on a new 127.0.0.1 listener with a plain
// net/http server, for harnesses of frameworks built on net/http (chi, gin,
// echo): build the framework's router with the middleware, hand it here,
// and return the result from Harness.Start. It speaks HTTP/1 and HTTP/2
// without TLS (h2c, prior knowledge). The server's error log is
// discarded, since the panic cases make net/http log on purpose. Close
// closes the listener and every connection at once.
func NewHTTPServer(h http.Handler, stats func() inbound.Stats) (*Server, error) {
	if h == nil || stats == nil {
		return nil, errors.New("conformance: NewHTTPServer needs a handler and a stats function")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	var once sync.Once
	return &Server{
		URL:   "http://" + ln.Addr().String(),
		Stats: stats,
		Close: func() {
			once.Do(func() {
				_ = srv.Close()
				wg.Wait()
			})
		},
	}, nil
}
