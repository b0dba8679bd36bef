package main

import (
	"context"
	"encoding/json"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	resiliencechi "github.com/ylcnfrht/resilience/adapters/chi"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// defaultPriority is the class of a request without a valid X-Priority.
const defaultPriority = 5

// newService builds the router: /healthz and /debug/limits first, outside
// the middleware, then /work behind the adaptive limiter.
func newService(knee int, base time.Duration) (http.Handler, error) {
	mw, err := resiliencechi.New(inbound.Options{
		Name:    "adaptive",
		Timeout: 5 * time.Second, // a timeout counts as overload: it lowers the limit
		Adaptive: &resilience.AdaptiveLimiterOptions{
			// The limit starts at 20 and finds the knee; MinLimit keeps a
			// few requests going when a dependency makes everything slow.
			MinLimit: 4,
			// A short queue absorbs bursts; the important classes wait in
			// front, and a full queue sheds the least important first.
			QueueLimit:   50,
			QueueTimeout: 200 * time.Millisecond,
			Priority:     requestPriority,
			Overflow:     resilience.OverflowDropLowestPriority,
		},
	})
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Method(http.MethodGet, "/debug/limits", limitsHandler(mw.Inbound().AdaptiveLimiter().Stats))
	r.Group(func(r chi.Router) {
		r.Use(mw.Handler)
		r.Handle("/work", workHandler(knee, base))
	})
	return r, nil
}

// requestPriority reads X-Priority through the request view: 0 is the most
// important class, 9 the least; anything else ranks as defaultPriority.
var requestPriority = func() func(context.Context) int {
	f, err := by.Priority(by.PriorityHeader{Name: "X-Priority", Min: 0, Max: 9, Default: defaultPriority})
	if err != nil {
		panic(err) // constant options: a programming error
	}
	return f
}()

// limitsHandler serves a limiter's live values as JSON. Any Stats method
// works: the fixed limiter's too.
func limitsHandler(stats func() resilience.LimiterStats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(stats()) // three ints: cannot fail
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(b, '\n'))
	})
}

// workHandler simulates a service with room for knee requests at once:
// each takes base while at most knee run, and proportionally longer
// beyond, so its throughput never exceeds knee/base.
func workHandler(knee int, base time.Duration) http.Handler {
	var active atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		defer active.Add(-1)
		d := base
		if n > int64(knee) {
			d = time.Duration(int64(base) * n / int64(knee))
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // timed out (the middleware answers 504) or the client left
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("done\n"))
	})
}
