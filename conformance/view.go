package conformance

import (
	"context"
	"net/http"
	"sync"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// RoutePattern is the route a harness mounts Config.Handler at, behind the
// middleware and for every method, besides the catch-all: written in the
// framework's own syntax ("/route/:id" in gin, echo and fiber). The
// request-view case requests "/route/42" and expects
// inbound.Request.Route to report RoutePattern.
const RoutePattern = "/route/{id}"

// viewHeader is the header the view case's functions read.
const viewHeader = "X-Conformance-View"

var viewCases = []Case{
	{
		Name: "request-view",
		Explanation: "Priority and rate-limit key functions read the request through the view (inbound.RequestFrom): Method, Path, " +
			"Route, ClientIP, a header and Raw, the framework's own request object. Checked for a Priority function with the fixed " +
			"limiter, with the adaptive limiter and inside a custom pipeline (each run when the request queues), and for a " +
			"rate-limit key function, on POST /route/42 mounted at RoutePattern: Route must be " + RoutePattern + " in every " +
			"configuration, or a priority that ranks by route silently ranks every request alike.",
		Requires: CapRoute,
		Pinned:   "every field but Route as in the full case; Route is \"\" (unknown), never a wrong pattern",
		run:      func(t *caseT, e *env) { caseRequestView(t, e, true) },
		pinned:   func(t *caseT, e *env) { caseRequestView(t, e, false) },
	},
}

// viewSeen is what a function read from the view, copied while it ran.
type viewSeen struct {
	method, path, route, header string
	loopback, raw               bool
}

// viewRecorder records what the functions under test read, by the
// request's view header.
type viewRecorder struct {
	mu   sync.Mutex
	seen map[string]viewSeen
}

func (v *viewRecorder) record(ctx context.Context) {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return
	}
	s := viewSeen{method: r.Method, path: r.Path, route: r.Route(), loopback: r.ClientIP.IsLoopback(), raw: r.Raw != nil}
	if r.Header != nil {
		s.header = r.Header.Get(viewHeader)
	}
	v.mu.Lock()
	v.seen[s.header] = s
	v.mu.Unlock()
}

func (v *viewRecorder) priority(ctx context.Context) int { v.record(ctx); return 0 }
func (v *viewRecorder) key(ctx context.Context) string   { v.record(ctx); return "k" }

func (v *viewRecorder) get(header string) (viewSeen, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.seen[header]
	return s, ok
}

func caseRequestView(t *caseT, e *env, routeKnown bool) {
	queue := func(rec *viewRecorder) resilience.ConcurrencyLimiterOptions {
		return resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: long, Priority: rec.priority}
	}
	configs := []struct {
		name  string
		queue bool // the function runs only for a request that queues
		opts  func(rec *viewRecorder) inbound.Options
	}{
		{"priority, fixed limiter", true, func(rec *viewRecorder) inbound.Options {
			c := queue(rec)
			return inbound.Options{Timeout: long, Concurrency: &c}
		}},
		{"priority, adaptive limiter", true, func(rec *viewRecorder) inbound.Options {
			return inbound.Options{Timeout: long, Adaptive: &resilience.AdaptiveLimiterOptions{
				InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueLimit: 1, QueueTimeout: long, Priority: rec.priority,
			}}
		}},
		{"priority, custom pipeline", true, func(rec *viewRecorder) inbound.Options {
			l, err := resilience.NewConcurrencyLimiter(queue(rec))
			if err != nil {
				t.Fatalf("limiter: %v", err)
			}
			p, err := resilience.NewBuilder[struct{}]().AddStrategy(l).Build()
			if err != nil {
				t.Fatalf("pipeline: %v", err)
			}
			return inbound.Options{Timeout: long, Pipeline: p, LimiterStats: l.Stats}
		}},
		{"rate-limit key", false, func(rec *viewRecorder) inbound.Options {
			return inbound.Options{Timeout: long, RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1 << 20, Window: long, Key: rec.key}}
		}},
	}
	for _, c := range configs {
		rec := &viewRecorder{seen: map[string]viewSeen{}}
		h := e.holder(false)
		s := e.start(c.opts(rec), h)
		var run <-chan result
		if c.queue {
			run = s.send(req{path: "/held?id=run"})
			h.waitEntered("run")
		}
		probe := s.send(req{method: http.MethodPost, path: "/route/42?id=probe", header: map[string]string{viewHeader: c.name}})
		if c.queue {
			s.waitStats("probe queued ("+c.name+")", func(st inbound.Stats) bool { return st.Queued == 1 })
			h.release("run")
			expectOK(t, "request run ("+c.name+")", s.await("request run", run), "done run")
		}
		h.waitEntered("probe")
		h.release("probe")
		expectOK(t, "probe ("+c.name+")", s.await("probe", probe), "done probe")
		s.waitIdle("after " + c.name)

		got, ok := rec.get(c.name)
		if !ok {
			t.Errorf("%s: the function never saw the probe's view (no view in its context, or the header %s missing)", c.name, viewHeader)
			continue
		}
		if got.method != http.MethodPost || got.path != "/route/42" {
			t.Errorf("%s: the view has Method %q and Path %q, want POST /route/42", c.name, got.method, got.path)
		}
		if !got.loopback {
			t.Errorf("%s: the view's ClientIP is not the loopback client", c.name)
		}
		if !got.raw {
			t.Errorf("%s: the view's Raw is nil, want the framework's request object", c.name)
		}
		switch {
		case routeKnown && got.route != RoutePattern:
			t.Errorf("%s: the view's Route() is %q, want %q", c.name, got.route, RoutePattern)
		case !routeKnown && got.route != "" && got.route != RoutePattern:
			t.Errorf("%s: the view's Route() is %q: an adapter that cannot know the route must report \"\"", c.name, got.route)
		}
	}
}
