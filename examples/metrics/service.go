package main

import (
	"context"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	resilienceotel "github.com/ylcnfrht/resilience/extensions/otel"
)

// Settings of the service. The alerting rules in alerts.yml and the
// dashboard name none of them: they hold for any name and floor.
const (
	// pipelineName labels every series of the service
	// (resilience_pipeline_name, resilience_limiter_name).
	pipelineName = "api"
	// serviceName is the OpenTelemetry resource's service.name (the
	// exporter's target_info series).
	serviceName = "resilience-metrics-example"
	// minLimit is the adaptive limiter's floor, exported as
	// resilience_limiter_min_limit.
	minLimit = 4
	// queueTimeout is the adaptive limiter's; the queue-wait histogram's
	// buckets are laid around it.
	queueTimeout = 100 * time.Millisecond
)

// service is the program's HTTP side and what must be released after it.
type service struct {
	handler http.Handler
	metrics *resilienceotel.Metrics // for tests that add a middleware
	close   func(context.Context) error
}

// newService builds the middleware (rate limit per client, adaptive
// concurrency limit, timeout), its metrics on an OpenTelemetry meter
// provider read by the Prometheus exporter, and the routes. timeout is the
// handlers' budget; work is how long /work takes.
func newService(timeout, work time.Duration) (*service, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Prometheus-style names: the ones alerts.yml uses.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", serviceName))))
	metrics, err := resilienceotel.New(resilienceotel.Options{
		MeterProvider:    provider,
		QueueWaitBuckets: resilienceotel.QueueWaitBuckets(queueTimeout),
	})
	if err != nil {
		return nil, err
	}

	// The algorithm, observed: the limiter's bounds and round-trip times
	// become gauges under the middleware's name.
	algorithm, stopAlgorithm, err := metrics.ObserveAlgorithm(pipelineName, nil)
	if err != nil {
		return nil, err
	}
	limiter, err := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{
		Name: "adaptive", InitialLimit: 20, MinLimit: minLimit, MaxLimit: 200,
		QueueLimit: 20, QueueTimeout: queueTimeout, Algorithm: algorithm,
	})
	if err != nil {
		return nil, err
	}
	pipeline, err := resilience.NewBuilder[struct{}](resilience.WithName(pipelineName), resilience.WithListener(metrics)).
		AddStrategy(metrics.ExecutionTimer(pipelineName)). // first: it sees queueing and shedding too
		AddStrategy(limiter).
		Build()
	if err != nil {
		return nil, err
	}
	mw, err := inbound.New(inbound.Options{
		Name:         pipelineName,
		Timeout:      timeout,
		RateLimit:    &resilience.RateLimiterOptions{Name: "per-client", PermitLimit: 600, Window: time.Minute, Key: by.ClientIP},
		Pipeline:     pipeline,
		LimiterStats: limiter.Stats,
		Listener:     metrics,
	})
	if err != nil {
		return nil, err
	}
	stopGauges := metrics.ObserveMiddleware(pipelineName, mw)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/limits", mw.StatsHandler())
	mux.Handle("/work", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := work
		if v, err := strconv.Atoi(r.URL.Query().Get("ms")); err == nil && v >= 0 && v <= 60_000 {
			d = time.Duration(v) * time.Millisecond
		}
		if r.URL.Query().Get("ignore-deadline") == "1" {
			// A handler that does not watch its context: past the timeout
			// it runs on, late, while the client has its 504.
			time.Sleep(d)
			w.Write([]byte("done\n"))
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			w.Write([]byte("done\n"))
		case <-r.Context().Done():
		}
	})))
	return &service{
		handler: mux,
		metrics: metrics,
		close: func(ctx context.Context) error {
			stopGauges()
			stopAlgorithm()
			metrics.Close()
			return provider.Shutdown(ctx)
		},
	}, nil
}
