package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/by"
)

// Work durations: ms defaults to defaultWorkMS and may not exceed maxWorkMS,
// so no request can keep a goroutine for longer than a minute.
const (
	defaultWorkMS = 100
	maxWorkMS     = 60_000
)

// priorityHeader carries a request's priority: an integer, lower runs
// sooner when requests have to queue.
const priorityHeader = "X-Priority"

// The range of X-Priority values the server believes: 0 (most important)
// to 9 (background). Anything else, missing, malformed or out of range
// (a client sending a large negative number to jump the queue), ranks as
// defaultPriority, in the middle, so callers can mark traffic as more or
// less important than unmarked traffic.
const (
	minPriority     = 0
	maxPriority     = 9
	defaultPriority = 5
)

// requestPriority is the limiter's Priority function: the request's
// X-Priority header, read through the request view the middleware puts in
// the context and bounded by by.Priority. The limiter calls it
// only for requests that must queue.
var requestPriority = mustPriority(by.Priority(by.PriorityHeader{
	Name: priorityHeader, Min: minPriority, Max: maxPriority, Default: defaultPriority,
}))

func mustPriority(f func(context.Context) int, err error) func(context.Context) int {
	if err != nil {
		panic(err) // constants above: a programming error
	}
	return f
}

// workDuration reads ?ms=N. A missing value means defaultWorkMS; a value
// that is not an integer in [0, maxWorkMS] is a client error.
func workDuration(r *http.Request) (time.Duration, bool) {
	s := r.URL.Query().Get("ms")
	if s == "" {
		return defaultWorkMS * time.Millisecond, true
	}
	ms, err := strconv.Atoi(s)
	if err != nil || ms < 0 || ms > maxWorkMS {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

func badMS(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, map[string]any{
		"statusCode": http.StatusBadRequest,
		"error":      "Bad Request",
		"message":    "ms must be an integer from 0 to " + strconv.Itoa(maxWorkMS),
	})
}

// workHandler simulates a dependency that keeps going whatever happens to
// the request: it sleeps for ms without looking at its context. With a
// short -timeout the client still gets a 504 on time, and the request keeps
// its concurrency permit until the sleep ends.
func workHandler(w http.ResponseWriter, r *http.Request) {
	d, ok := workDuration(r)
	if !ok {
		badMS(w)
		return
	}
	time.Sleep(d)
	writeJSON(w, http.StatusOK, map[string]any{"worked": d.String()})
}

// cooperativeHandler does the same work but stops as soon as its context is
// done (timeout, client gone, or shutdown), releasing its permit at once.
func cooperativeHandler(w http.ResponseWriter, r *http.Request) {
	d, ok := workDuration(r)
	if !ok {
		badMS(w)
		return
	}
	if err := sleepCtx(r.Context(), d); err != nil {
		// The middleware has answered already (504) or the client has gone;
		// anything written now would be discarded.
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"worked": d.String()})
}

// exportCost is what GET /export costs: as many permits of the
// concurrency limiter, and tokens of the rate limit, as ten reads. With
// -permit-limit below it, an export takes the whole limit and runs alone.
const exportCost = 10

// requestCost is the limiter's and the rate limit's Cost function: an
// export costs exportCost, anything else 1. It reads the request view, so
// it works the same behind every adapter.
func requestCost(ctx context.Context) int {
	if r, ok := inbound.RequestFrom(ctx); ok && r.Path == "/export" {
		return exportCost
	}
	return 1
}

// exportHandler simulates an export: work like /work's (ms, ignoring its
// context), but it costs exportCost permits while it runs, so a few
// exports fill the limit that many reads would share.
func exportHandler(w http.ResponseWriter, r *http.Request) {
	d, ok := workDuration(r)
	if !ok {
		badMS(w)
		return
	}
	time.Sleep(d)
	writeJSON(w, http.StatusOK, map[string]any{"exported": d.String()})
}

// sleepCtx waits for d or until ctx is done, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
