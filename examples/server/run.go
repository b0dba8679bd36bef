package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/ready"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds how long a shutdown (Drain, then Server.Shutdown)
// waits for running requests. A /work request ignores its context, so it
// can outlive this; the server then closes its connections rather than
// hang.
const shutdownGrace = 5 * time.Second

// serverProtocols are HTTP/1.1 and cleartext HTTP/2 (h2c), which gRPC
// clients need without TLS.
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// run is the whole program: parse args, listen, print where, serve until
// ctx is done, then shut down. It returns the process exit code: 0 after a
// clean shutdown (or -h), 2 for invalid flags, 1 for any other failure.
// Once it listens, its first line on stdout is
// "listening on http://HOST:PORT" ("listening on HOST:PORT (gRPC,
// plaintext)" with -framework grpc); nothing is printed to stdout before.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		if isHelp(err) {
			return 0
		}
		fmt.Fprintln(stderr, "server:", err)
		return 2
	}
	srv, mw, err := buildServer(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "server:", err)
		return 2
	}
	if cfg.configFile != "" {
		// SIGHUP reloads the file; registered before the first line, so a
		// signal sent once it is read is a reload, never the default
		// action (exit).
		stop := make(chan struct{})
		done := watchReloads(args, cfg, mw, stdout, stderr, stop)
		defer func() {
			close(stop)
			<-done
		}()
	}
	ready := ready.New(mw)
	switch s := srv.(type) {
	case *http.Server:
		s.Handler = withReadiness(s.Handler, ready)
	case readinessRouter:
		s.routeReadiness(ready)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		fmt.Fprintf(stderr, "server: -addr: cannot listen: %v\n", err)
		return 1
	}
	debug, err := listenDebug(cfg, mw, ready, stderr)
	if err != nil {
		ln.Close()
		fmt.Fprintln(stderr, "server:", err)
		return 1
	}
	base, listening := "http://"+ln.Addr().String(), ""
	if cfg.framework == "grpc" {
		base, listening = ln.Addr().String(), " (gRPC, plaintext)" // what gRPC clients dial
	}
	fmt.Fprintf(stdout, "listening on %s%s\n", base, listening)
	fmt.Fprintf(stdout, "framework %s; timeout %v; %s; queue %d (timeout %v, overflow %s%s); %s%s\n",
		cfg.framework, cfg.timeout, limiterSummary(cfg), cfg.queueLimit, cfg.queueTimeout, cfg.overflow, codelSummary(cfg), rateSummary(cfg), shadowSummary(cfg))
	fmt.Fprint(stdout, routeSummary(cfg, base))
	if debug != nil {
		fmt.Fprint(stdout, debugSummary(debug))
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr: // Serve failed on its own (it never returns nil)
		fmt.Fprintln(stderr, "server:", err)
		if debug != nil {
			debug.srv.Close()
			<-debug.done
		}
		return 1
	case <-ctx.Done():
	}
	// The shutdown order a load balancer needs: /readyz fails first while
	// requests are still served, so the balancer (Kubernetes: the
	// endpoints) stops sending during -ready-delay; then Drain answers
	// the stragglers and the queue 503 shutting-down at once, instead of
	// admitting them during the grace or cutting them off at its end;
	// then Shutdown closes the idle connections and waits for the rest.
	ready.Fail()
	if h, ok := srv.(healthFailer); ok {
		h.failHealth()
	}
	fmt.Fprintf(stdout, "shutting down: /readyz fails; draining in %v\n", cfg.readyDelay)
	if cfg.readyDelay > 0 {
		time.Sleep(cfg.readyDelay)
	}
	fmt.Fprintln(stdout, "draining")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	code := 0
	if s, ok := srv.(*http.Server); ok {
		// The middleware's own answers from now on say Connection: close;
		// this makes the running handlers' answers say it too (HTTP/1.1),
		// and sends GOAWAY on an HTTP/2 connection once it is idle.
		s.SetKeepAlivesEnabled(false)
	}
	if err := mw.Drain(sctx); err != nil {
		fmt.Fprintln(stderr, "server: drain:", err)
	}
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "server: shutdown:", err)
		srv.Close()
		code = 1
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "server:", err)
		code = 1
	}
	if debug != nil {
		// Last, so /debug/limits and /readyz answer through the drain.
		dctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := debug.close(dctx); err != nil {
			fmt.Fprintln(stderr, "server: -debug-addr:", err)
			code = 1
		}
	}
	return code
}

func rateSummary(cfg config) string {
	if cfg.rateLimit == 0 {
		return "no rate limit"
	}
	return fmt.Sprintf("rate limit %d per %v by %s", cfg.rateLimit, cfg.rateWindow, cfg.rateKey)
}

func limiterSummary(cfg config) string {
	if cfg.adaptive {
		return fmt.Sprintf("adaptive limit starting at %d", cfg.permitLimit)
	}
	return fmt.Sprintf("permit limit %d", cfg.permitLimit)
}

// shadowSummary tells, at start-up, that -shadow or -shadow-share is on:
// the limits printed before it are then counted more than enforced.
func shadowSummary(cfg config) string {
	switch {
	case cfg.shadowShare == 100:
		return "; shadow 100%: every decision counted in /debug/limits \"shadow\", none enforced"
	case cfg.shadowShare > 0:
		return fmt.Sprintf("; shadow %d%%: that share of the decisions counted in /debug/limits \"shadow\", not enforced", cfg.shadowShare)
	}
	return ""
}

func codelSummary(cfg config) string {
	if cfg.codel {
		return ", CoDel"
	}
	return ""
}

// httpServer is the reference server's http.Server: every timeout a
// public server needs, so that slow or idle clients cannot hold
// connections and goroutines.
func httpServer(handler http.Handler, stderr io.Writer) *http.Server {
	return &http.Server{
		Handler:           handler,
		Protocols:         serverProtocols(),
		ReadHeaderTimeout: 10 * time.Second,
		// ReadTimeout bounds reading a whole request, body included, so a
		// client that trickles its body cannot hold a connection; it does
		// not limit the handler (Options.Timeout does).
		ReadTimeout: 30 * time.Second,
		// IdleTimeout closes keep-alive connections that sit idle, so
		// idle clients do not pile up connections and goroutines.
		IdleTimeout: 60 * time.Second,
		ErrorLog:    log.New(stderr, "server: http: ", 0),
	}
}

// healthFailer is a server whose own health service (grpc's) fails with
// /readyz, at the start of -ready-delay.
type healthFailer interface {
	failHealth()
}

// readinessRouter is a server of its own (fiber's) that routes /readyz
// to ready itself, outside the middleware.
type readinessRouter interface {
	routeReadiness(ready *ready.Probe)
}

// withReadiness serves ready at /readyz ahead of the framework's routes,
// outside the middleware, so it answers while the server is saturated.
func withReadiness(next http.Handler, ready *ready.Probe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			ready.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
