package main

import (
	"context"
	"errors"
	"fmt"
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
	switch cfg.framework {
	case "chi":
		mw, err := resiliencechi.New(inboundOptions(cfg))
		if err != nil {
			return nil, nil, asFlagError(err)
		}
		return chiRoutes(mw), mw.Inbound(), nil
	default:
		return nil, nil, &flagError{"framework", "unknown framework " + cfg.framework}
	}
}

// inboundOptions translates the flags into the middleware's options.
func inboundOptions(cfg config) inbound.Options {
	opts := inbound.Options{
		Name:    "server",
		Timeout: cfg.timeout,
		Concurrency: &resilience.ConcurrencyLimiterOptions{
			PermitLimit:  cfg.permitLimit,
			QueueLimit:   cfg.queueLimit,
			QueueTimeout: cfg.queueTimeout,
			Overflow:     cfg.overflow,
			Priority:     requestPriority,
		},
	}
	if cfg.rateLimit > 0 {
		key := inbound.KeyByClientIP
		if cfg.rateKey.header != "" {
			key = inbound.KeyByHeader(cfg.rateKey.header)
		}
		opts.RateLimit = &resilience.RateLimiterOptions{
			PermitLimit: cfg.rateLimit,
			Window:      cfg.rateWindow,
			Key:         key,
		}
	}
	return opts
}

// requestPriority is the limiter's Priority function: the request's
// X-Priority header, read through the request view the middleware puts in
// the context. The limiter calls it only for requests that must queue.
func requestPriority(ctx context.Context) int {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return defaultPriority
	}
	return parsePriority(r.Header.Get(priorityHeader))
}

// chiRoutes mounts the routes on a chi router. The two diagnostic routes are
// registered on the root; the middleware applies only inside the group.
func chiRoutes(mw *resiliencechi.Middleware) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", healthz)
	r.Method(http.MethodGet, "/debug/limits", mw.Inbound().StatsHandler())
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Get("/work", workHandler)
		r.Get("/cooperative", cooperativeHandler)
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
	"RateLimiterOptions.PermitLimit":         "rate-limit",
	"RateLimiterOptions.Window":              "rate-window",
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
	// Enough concurrent clients to fill every permit and queue place and
	// then some, without spawning thousands of processes.
	n := min(cfg.permitLimit+cfg.queueLimit+100, 1000)
	var b strings.Builder
	for _, l := range []string{
		"routes:",
		"  GET /healthz                outside the middleware: never shed",
		"  GET /debug/limits           outside the middleware: live limit, inflight, queued, late (JSON)",
		"  GET /work?ms=N              sleeps N ms ignoring its context (like a dependency that keeps going)",
		"  GET /cooperative?ms=N       sleeps N ms but stops when its context is done",
		"  header X-Priority: N        integer, lower runs sooner when queued; missing or malformed = " + strconv.Itoa(defaultPriority),
		"",
		"try:",
		"  curl -s " + base + "/healthz",
		"  curl -s " + base + "/debug/limits",
		"  curl -si '" + base + "/work?ms=200'",
		"  curl -si -H 'X-Priority: 0' '" + base + "/cooperative?ms=200'",
		fmt.Sprintf("  # overload: %d concurrent 2 s requests for %d permits and %d queue places;", n, cfg.permitLimit, cfg.queueLimit),
		fmt.Sprintf("  # expect about %d answered 200, the rest 503 BULKHEAD_FULL (watch /debug/limits meanwhile)", cfg.permitLimit),
		fmt.Sprintf("  for i in $(seq %d); do curl -s -o /dev/null -w '%%{http_code}\\n' '%s/work?ms=2000' & done | sort | uniq -c", n, base),
		fmt.Sprintf("  # past -timeout (%v) the client gets a 504 on time, though /work keeps going", cfg.timeout),
		fmt.Sprintf("  curl -si '%s/work?ms=%d'", base, min(cfg.timeout.Milliseconds()+1000, maxWorkMS)),
	} {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
