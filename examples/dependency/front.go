package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/outbound"
)

// config is what the front server is made of; tests shorten the times.
type config struct {
	inboundTimeout time.Duration // the whole request's budget: 5 s
	recTimeout     time.Duration // one recommendations call: 300 ms
	recLimit       int           // recommendations calls at once: 20
	serviceURL     string        // base URL of the recommendations service
	base           http.RoundTripper
	logger         *slog.Logger
}

func defaultConfig() config {
	return config{inboundTimeout: 5 * time.Second, recTimeout: 300 * time.Millisecond, recLimit: 20}
}

// front is the page-rendering server.
type front struct {
	cfg    config
	client *http.Client
	recs   *resilience.Pipeline[[]string]
}

// newFront builds the front server's handler: the inbound middleware around
// the routes.
func newFront(cfg config) (http.Handler, error) {
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	listener := event.NewSlogListener(cfg.logger)
	// The dependency's own transport: a circuit breaker on its 5xx, so a
	// failing service is given a rest. No retry: within 300 ms there is no
	// time for one.
	cb, err := resilience.NewCircuitBreaker(outbound.CircuitBreakerOptions())
	if err != nil {
		return nil, err
	}
	transportPipeline, err := resilience.NewBuilder[*http.Response](resilience.WithName("recommendations-http"), resilience.WithListener(listener)).
		AddResultStrategy(cb).
		Build()
	if err != nil {
		return nil, err
	}
	tr, err := outbound.New(outbound.Options{Base: cfg.base, Pipeline: transportPipeline})
	if err != nil {
		return nil, err
	}
	// The recipe: fallback → concurrency limiter of recLimit with no queue
	// → timeout. The fallback is outermost so it also answers the
	// limiter's own rejections.
	recs, err := resilience.NewBuilder[[]string](resilience.WithName("recommendations"), resilience.WithListener(listener)).
		AddFallback(resilience.FallbackOptions[[]string]{FallbackValue: []string{}}).
		AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: cfg.recLimit}).
		AddTimeout(resilience.TimeoutOptions{Timeout: cfg.recTimeout}).
		Build()
	if err != nil {
		return nil, err
	}
	f := &front{cfg: cfg, client: &http.Client{Transport: tr}, recs: recs}

	mw, err := inbound.New(inbound.Options{
		Name:        "front",
		Timeout:     cfg.inboundTimeout,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 200, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond},
		Listener:    listener,
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /product/{id}", f.product)
	mux.HandleFunc("GET /report", f.report)
	return mw.Handler(mux), nil
}

// page is the rendered product page.
type page struct {
	Product         string   `json:"product"`
	Recommendations []string `json:"recommendations"`
}

func (f *front) product(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// Never an error: the fallback turns every failure into an empty list.
	recs, _ := f.recs.Execute(r.Context(), func(ctx context.Context) ([]string, error) {
		return f.fetchRecommendations(ctx, id)
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(page{Product: id, Recommendations: recs})
}

// fetchRecommendations reads the whole answer inside the pipeline, so the
// timeout bounds the body as well as the headers.
func (f *front) fetchRecommendations(ctx context.Context, id string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.cfg.serviceURL+"/recommendations/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("recommendations: status %d", resp.StatusCode)
	}
	var list []string
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list, nil
}

// report makes a nested call with nothing but the request's context. When
// the inbound deadline passes, that context ends, the call stops, and the
// middleware has already answered 504.
func (f *front) report(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, f.cfg.serviceURL+"/report", nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.cfg.logger.Info("nested report call stopped", "error", err)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
}
