package main

import (
	"net/http"
	"slices"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// serverBuilder builds the reference server's routes on one framework: the
// router, and the inbound middleware underneath the adapter.
type serverBuilder func(cfg config) (http.Handler, *inbound.Middleware, error)

// builders maps each -framework value to its builder. Each framework
// registers itself, from a file of its own (framework_NAME.go).
var builders = map[string]serverBuilder{}

// register adds a framework to -framework.
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
