// Package resiliencechi puts resilience's inbound load shedding in front of
// a chi router: rate limit (429) → concurrency limiter with a priority
// queue (503) → timeout (504), configured by inbound.Options and behaving
// exactly as core/inbound documents (it passes the conformance suite in
// full).
//
//	mw, err := resiliencechi.New(inbound.Options{
//		Timeout:     5 * time.Second,
//		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 200, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond},
//	})
//	if err != nil {
//		return err // a *resilience.ConfigError naming the field
//	}
//	r := chi.NewRouter()
//	r.Get("/healthz", health) // registered outside the middleware: never shed
//	r.Group(func(r chi.Router) {
//		r.Use(mw.Handler)
//		r.Get("/users/{id}", getUser)
//	})
//
// The adapter is thin: the inbound net/http middleware does the work. What
// it adds is chi's route pattern. A middleware in r.Use runs before chi
// has routed the request, so the pattern ("/users/{id}") is not known yet;
// when the configuration has a function that reads the request view (a
// rate limit, a Priority function or a custom pipeline), the adapter looks
// the route up in the router itself and puts the pattern in
// inbound.Request.Route, so a priority or key function can rank or count
// by route:
//
//	Priority: func(ctx context.Context) int {
//		if r, ok := inbound.RequestFrom(ctx); ok && r.Route == "/checkout" {
//			return 0
//		}
//		return 1
//	},
//
// Without such a function, no lookup is made. chi's own routing context is
// in the same context too (chi.RouteContext(ctx)), and the *http.Request is
// available through inbound.NetHTTPRequest(ctx).
package resiliencechi
