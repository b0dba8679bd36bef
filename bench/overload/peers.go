package main

import (
	"net/http"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/go-chi/chi/v5/middleware"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// peers are the other libraries' middleware, each built from the lab's
// knobs where it has the option: limit, queue and queue timeout. None of
// them has the server-side timeout the project's modes have.
func peers() []lab.Contender {
	return []lab.Contender{
		{Name: "chi-throttle", New: func(k lab.Knobs) (func(http.Handler) http.Handler, error) {
			// chi's ThrottleBacklog: limit, backlog and backlog timeout.
			return middleware.ThrottleBacklog(k.Limit, k.Queue, k.QueueTimeout), nil
		}},
		{Name: "failsafe-bulkhead", New: func(k lab.Knobs) (func(http.Handler) http.Handler, error) {
			// A bulkhead has a wait time but no bound on its waiters.
			bh := bulkhead.NewBuilder[*http.Response](uint(k.Limit)).WithMaxWaitTime(k.QueueTimeout).Build()
			return func(next http.Handler) http.Handler { return failsafehttp.NewHandler(next, bh) }, nil
		}},
		{Name: "failsafe-adaptive", New: func(lab.Knobs) (func(http.Handler) http.Handler, error) {
			// The adaptive limiter with its defaults: limits 1..200 from 20,
			// no queue.
			al := adaptivelimiter.NewWithDefaults[*http.Response]()
			return func(next http.Handler) http.Handler { return failsafehttp.NewHandler(next, al) }, nil
		}},
		{Name: "failsafe-adaptive-capped", New: func(k lab.Knobs) (func(http.Handler) http.Handler, error) {
			// Capped at the limit, with a queue of about the limit (queueing
			// starts rejecting at 1 × the limit, all at 2 ×) and the wait.
			al := adaptivelimiter.NewBuilder[*http.Response]().
				WithLimits(1, uint(k.Limit), uint(min(20, k.Limit))).
				WithQueueing(1, 2).
				WithMaxWaitTime(k.QueueTimeout).
				Build()
			return func(next http.Handler) http.Handler { return failsafehttp.NewHandler(next, al) }, nil
		}},
		{Name: "semaphore", New: func(k lab.Knobs) (func(http.Handler) http.Handler, error) {
			// x/sync/semaphore, try-acquire: the limit and no queue.
			sem := semaphore.NewWeighted(int64(k.Limit))
			return func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !sem.TryAcquire(1) {
						http.Error(w, "busy", http.StatusServiceUnavailable)
						return
					}
					defer sem.Release(1)
					next.ServeHTTP(w, r)
				})
			}, nil
		}},
		{Name: "x-time-rate", New: func(k lab.Knobs) (func(http.Handler) http.Handler, error) {
			// x/time/rate at the service's capacity, burst of the limit: a
			// rate, not a concurrency, so it cannot see the service slow.
			lim := rate.NewLimiter(rate.Limit(k.Rate), k.Limit)
			return func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !lim.Allow() {
						http.Error(w, "rate limited", http.StatusTooManyRequests)
						return
					}
					next.ServeHTTP(w, r)
				})
			}, nil
		}},
	}
}
