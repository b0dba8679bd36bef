package main

import (
	"errors"
	"fmt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// newServer builds the reference server's routes for cfg: /healthz and
// /debug/limits outside the inbound middleware (they answer while the server
// is saturated), /work and /cooperative behind it. It returns the router and
// the inbound middleware underneath the adapter, whose Stats the caller
// may read. An invalid configuration that slipped past parseConfig is a
// *flagError.
func newServer(cfg config) (http.Handler, *inbound.Middleware, error) {
	build, ok := builders[cfg.framework]
	if !ok {
		return nil, nil, &flagError{"framework", "unknown framework " + cfg.framework}
	}
	return build(cfg)
}

// inboundOptions translates the flags into the middleware's options.
func inboundOptions(cfg config) inbound.Options {
	opts := inbound.Options{Name: "server", Timeout: cfg.timeout}
	opts.Shadow = inbound.Shadow{RateLimit: cfg.shadowShare, Concurrency: cfg.shadowShare, Timeout: cfg.shadowShare}
	var codel *resilience.CoDelOptions
	if cfg.codel {
		codel = &resilience.CoDelOptions{}
	}
	if cfg.adaptive {
		opts.Adaptive = &resilience.AdaptiveLimiterOptions{
			InitialLimit: cfg.permitLimit,
			MaxLimit:     max(cfg.permitLimit, 1000), // the default ceiling, or the initial limit if above it
			QueueLimit:   cfg.queueLimit,
			QueueTimeout: cfg.queueTimeout,
			Overflow:     cfg.overflow,
			Priority:     requestPriority,
			CoDel:        codel,
		}
	} else {
		opts.Concurrency = &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  cfg.permitLimit,
			QueueLimit:   cfg.queueLimit,
			QueueTimeout: cfg.queueTimeout,
			Overflow:     cfg.overflow,
			Priority:     requestPriority,
			CoDel:        codel,
			Cost:         requestCost, // /export takes exportCost permits
		}
	}
	if cfg.rateLimit > 0 {
		key := by.ClientIP
		if cfg.rateKey.header != "" {
			key = by.Header(cfg.rateKey.header)
		}
		opts.RateLimit = &resilience.RateLimiterOptions{
			PermitLimit: cfg.rateLimit,
			Window:      cfg.rateWindow,
			Key:         key,
			Cost:        requestCost, // and as many tokens
		}
	}
	return opts
}

// chiRoutes mounts the routes on a chi router. The two diagnostic routes are
// registered on the root; the middleware applies only inside the group.
func chiRoutes(mw *resiliencechi.Middleware) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", healthz)
	r.Method(http.MethodGet, "/debug/limits", limitsHandler(mw.Inbound()))
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get("/work", workHandler)
		r.Get("/cooperative", cooperativeHandler)
		r.Get("/export", exportHandler)
	})
	return r
}

// optionFlags maps the option fields the middleware may reject to the flag
// that sets them, so its *ConfigError is reported in the user's terms.
var optionFlags = map[string]string{
	"Options.Timeout":                        "timeout",
	"ConcurrencyLimiterOptions.PermitLimit":  "permit-limit",
	"ConcurrencyLimiterOptions.QueueLimit":   "queue-limit",
	"ConcurrencyLimiterOptions.QueueTimeout": "queue-timeout",
	"ConcurrencyLimiterOptions.Overflow":     "overflow",
	"AdaptiveLimiterOptions.InitialLimit":    "permit-limit",
	"AdaptiveLimiterOptions.QueueLimit":      "queue-limit",
	"AdaptiveLimiterOptions.QueueTimeout":    "queue-timeout",
	"AdaptiveLimiterOptions.Overflow":        "overflow",
	"RateLimiterOptions.PermitLimit":         "rate-limit",
	"RateLimiterOptions.Window":              "rate-window",
	"Options.Shadow.RateLimit":               "shadow-share",
	"Options.Shadow.Concurrency":             "shadow-share",
	"Options.Shadow.Timeout":                 "shadow-share",
	"Options.RateLimit":                      "rate-limit",
	"ConcurrencyLimiterOptions.CoDel":        "codel",
	"AdaptiveLimiterOptions.CoDel":           "codel",
}

func asFlagError(err error) error {
	var ce *resilience.ConfigError
	if errors.As(err, &ce) {
		if f, ok := optionFlags[ce.Field]; ok {
			return &flagError{f, ce.Problem}
		}
	}
	return err
}

// routeSummary describes the routes for the startup banner, with curl
// lines for this configuration.
func routeSummary(cfg config, base string) string {
	if cfg.framework == "grpc" {
		return grpcRouteSummary(cfg, base)
	}
	var b strings.Builder
	for _, l := range []string{
		"routes:",
		"  GET /healthz                outside the middleware: never shed",
		"  GET /readyz                 readiness: 503 from the first shutdown signal on (not grpc: its health service)",
		"  GET /debug/limits           outside the middleware: live limit, inflight, queued, late, config, reloads (JSON)",
		"  GET /work?ms=N              sleeps N ms ignoring its context (like a dependency that keeps going)",
		"  GET /cooperative?ms=N       sleeps N ms but stops when its context is done",
		"  GET /export?ms=N            sleeps N ms like /work, costing " + strconv.Itoa(exportCost) + " permits and rate-limit tokens (not under -adaptive: 1 permit)",
		"  header X-Priority: N        0 to 9, lower runs sooner when queued; anything else = " + strconv.Itoa(defaultPriority),
		"",
		"try:",
		"  curl -s " + base + "/healthz",
		"  curl -s " + base + "/debug/limits",
		"  curl -si '" + base + "/work?ms=200'",
		"  curl -si -H 'X-Priority: 0' '" + base + "/cooperative?ms=200'",
		"  # overload: go run ./examples/overload (a load lab: the same limiters, measured)",
		fmt.Sprintf("  # past -timeout (%v) the client gets a 504 on time, though /work keeps going", cfg.timeout),
		fmt.Sprintf("  curl -si '%s/work?ms=%d'", base, min(cfg.timeout.Milliseconds()+1000, maxWorkMS)),
	} {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String() + connectTrySummary(cfg, base)
}
