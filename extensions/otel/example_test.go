package resilienceotel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	resilienceotel "github.com/ylcnfrht/resilience/extensions/otel"
)

// A middleware reporting its rejections and its limiter to OpenTelemetry;
// here a manual reader stands for the exporter.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	metrics, err := resilienceotel.New(resilienceotel.Options{MeterProvider: provider})
	if err != nil {
		panic(err)
	}
	defer metrics.Close()
	mw, err := inbound.New(inbound.Options{
		Name:      "api",
		RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Minute},
		Listener:  metrics,
	})
	if err != nil {
		panic(err)
	}
	defer metrics.ObserveMiddleware("api", mw)()

	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == resilienceotel.MetricEvents {
			reason, _ := sum.DataPoints[0].Attributes.Value(resilienceotel.AttrReason)
			fmt.Println(m.Name, reason.AsString(), sum.DataPoints[0].Value)
		}
	}
	// Output:
	// resilience.events rate-limited 2
}
