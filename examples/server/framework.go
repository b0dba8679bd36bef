package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// serverBuilder builds the reference server's routes on a framework built
// on net/http: the router, and the inbound middleware underneath the
// adapter.
type serverBuilder func(cfg config) (http.Handler, *inbound.Middleware, error)

// builders maps each net/http -framework value to its builder. Each
// framework registers itself, from a file of its own (framework_NAME.go).
var builders = map[string]serverBuilder{}

// register adds a framework built on net/http to -framework.
func register(name string, b serverBuilder) {
	builders[name] = b
	frameworks = append(frameworks, name)
	slices.Sort(frameworks)
}

func init() {
	register("chi", func(cfg config) (http.Handler, *inbound.Middleware, error) {
		mw, err := resiliencechi.New(inboundOptions(cfg))
		if err != nil {
			return nil, nil, asFlagError(err)
		}
		return chiRoutes(mw), mw.Inbound(), nil
	})
}

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
// http.Handler, keyed by -framework value. Each registers itself from its
// own file.
var serverFuncs = map[string]func(cfg config, errLog io.Writer) (server, *inbound.Middleware, error){}

// registerServer adds a framework with its own server to -framework.
func registerServer(name string, f func(cfg config, errLog io.Writer) (server, *inbound.Middleware, error)) {
	serverFuncs[name] = f
	frameworks = append(frameworks, name)
	slices.Sort(frameworks)
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
