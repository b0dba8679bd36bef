package main

import (
	"net/http"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// frameworkBuilder serves the reference routes for cfg on one framework:
// the handler, and the inbound middleware underneath its adapter (for its
// Stats).
type frameworkBuilder func(cfg config) (http.Handler, *inbound.Middleware, error)

// builders holds every framework's builder by -framework name. Each
// framework registers itself from a file of its own
// (framework_NAME.go).
var builders = map[string]frameworkBuilder{"chi": chiServer}

// registerFramework adds a framework from its file's init.
func registerFramework(name string, b frameworkBuilder) {
	builders[name] = b
	frameworks = append(frameworks, name)
}
