package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/ready"
)

// debugHandler is the -debug-addr listener's routes, each outside the
// middleware so that it answers while the server is saturated:
// /debug/limits (the same JSON as on the HTTP frameworks' own listener),
// /readyz (the same probe, failing from the first shutdown signal on) and
// /healthz. Anything else is 404.
func debugHandler(mw *inbound.Middleware, probe *ready.Probe) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /debug/limits", limitsHandler(mw))
	mux.Handle("GET /readyz", probe)
	mux.HandleFunc("GET /healthz", healthz)
	return mux
}

// debugServer is the -debug-addr listener, serving from Listen until
// Close, which returns once it has stopped.
type debugServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// listenDebug listens on cfg.debugAddr and serves debugHandler there,
// or returns nil, nil when -debug-addr is empty. The error names the
// flag.
func listenDebug(cfg config, mw *inbound.Middleware, probe *ready.Probe, stderr io.Writer) (*debugServer, error) {
	if cfg.debugAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.debugAddr)
	if err != nil {
		return nil, fmt.Errorf("-debug-addr: cannot listen: %w", err)
	}
	d := &debugServer{srv: httpServer(debugHandler(mw, probe), stderr), ln: ln, done: make(chan error, 1)}
	go func() { d.done <- d.srv.Serve(ln) }()
	return d, nil
}

// url is the listener's address as curl takes it.
func (d *debugServer) url() string { return "http://" + d.ln.Addr().String() }

// close stops the listener after the main server has drained, so the
// statistics stay readable throughout the shutdown; its requests are
// short, so it waits for them within ctx, then cuts them off.
func (d *debugServer) close(ctx context.Context) error {
	err := d.srv.Shutdown(ctx)
	if err != nil {
		d.srv.Close()
	}
	if serveErr := <-d.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// debugSummary is the start-up lines of the -debug-addr listener.
func debugSummary(d *debugServer) string {
	base := d.url()
	return "debug listener on " + base + " (outside the middleware):\n" +
		"  curl -s " + base + "/debug/limits\n" +
		"  curl -s " + base + "/readyz\n"
}
