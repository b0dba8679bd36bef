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
// when a priority or key function reads inbound.Request.Route, the adapter
// looks the route up in the router itself, once per request, so the
// function can rank or count by route:
//
//	Priority: func(ctx context.Context) int {
//		if r, ok := inbound.RequestFrom(ctx); ok && r.Route() == "/checkout" {
//			return 0
//		}
//		return 1
//	},
//
// The route is in inbound's format, the same from every adapter: a
// parameter's regular expression is dropped ("/orders/{id:[0-9]+}" is
// reported as "/orders/{id}"). No lookup is made unless Route is read. The view's Raw is the
// *http.Request, whose context holds chi's routing context
// (chi.RouteContext).
package resiliencechi
