package main

import (
	"context"
	"io"
	"net"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// server serves the reference routes on a listener until shut down:
// *http.Server for frameworks built on net/http, the framework's own
// server otherwise. Serve returns nil or http.ErrServerClosed after
// Shutdown or Close.
type server interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
	Close() error
}

// serverFuncs builds the server of each framework that does not serve an
// http.Handler (newServer's frameworks), keyed by -framework value. Each
// registers itself from its own file.
var serverFuncs = map[string]func(cfg config, errLog io.Writer) (server, *inbound.Middleware, error){}

// registerServer adds a framework with its own server to -framework.
func registerServer(name string, f func(cfg config, errLog io.Writer) (server, *inbound.Middleware, error)) {
	serverFuncs[name] = f
	frameworks = append(frameworks, name)
}

// buildServer returns the server for cfg.framework and the inbound
// middleware underneath its adapter.
func buildServer(cfg config, errLog io.Writer) (server, *inbound.Middleware, error) {
	if f, ok := serverFuncs[cfg.framework]; ok {
		return f(cfg, errLog)
	}
	handler, mw, err := newServer(cfg)
	if err != nil {
		return nil, nil, err
	}
	return httpServer(handler, errLog), mw, nil
}
