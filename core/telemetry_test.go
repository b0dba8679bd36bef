package resilience

import (
	"context"
	"testing"

	"github.com/ylcnfrht/resilience/core/event"
)

func TestZeroTelemetryIsSilent(t *testing.T) {
	var tel Telemetry
	if tel.Enabled() {
		t.Fatal("zero Telemetry enabled")
	}
	tel.Emit(context.Background(), event.Event{Name: event.Timeout}) // must not panic
}

func TestTelemetryLabelsEvents(t *testing.T) {
	var got event.Event
	tel := NewTelemetry("api", "Timeout", event.ListenerFunc(func(_ context.Context, e event.Event) { got = e }))
	tel.Emit(context.Background(), event.Event{Name: event.Timeout})
	if got.Name != event.Timeout || got.Pipeline != "api" || got.Strategy != "Timeout" {
		t.Fatalf("got %+v", got)
	}
}
