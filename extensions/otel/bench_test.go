package resilienceotel

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
)

// BenchmarkOnEvent is one event recorded on the SDK, against a telemetry
// with no listener as baseline: a rejection after queueing (counter and
// queue-wait histogram) and a timeout (counter only).
func BenchmarkOnEvent(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	m, err := New(Options{MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	rejected := event.Event{Name: event.ConcurrencyLimiterRejected, Reason: "queue-timeout", Duration: time.Millisecond,
		Err: &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout}}
	timeout := event.Event{Name: event.Timeout, Duration: time.Second, Err: resilience.ErrTimeoutRejected}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		l    event.Listener
		e    event.Event
	}{{"none", nil, rejected}, {"otel", m, rejected}, {"otel-counter-only", m, timeout}} {
		b.Run(c.name, func(b *testing.B) {
			tel := resilience.NewTelemetry("api", "limiter", c.l)
			b.ReportAllocs()
			for b.Loop() {
				tel.Emit(ctx, c.e)
			}
		})
	}
}

// BenchmarkExecutionTimer is a pipeline execution with and without the
// timer in front, on the SDK.
func BenchmarkExecutionTimer(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	m, err := New(Options{MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	noop := func(context.Context) (struct{}, error) { return struct{}{}, nil }
	for _, timed := range []bool{false, true} {
		name := "bare"
		bld := resilience.NewBuilder[struct{}](resilience.WithName("api"))
		if timed {
			name = "timed"
			bld.AddStrategy(m.ExecutionTimer("api"))
		}
		p, err := bld.AddConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 100}).Build()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Execute(ctx, noop); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
