package resilience

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestSlogListenerRendersEvents(t *testing.T) {
	var buf bytes.Buffer
	l := NewSlogListener(slog.New(slog.NewTextHandler(&buf, nil)))
	tel := NewTelemetry("api", "Timeout", l)
	tel.Emit(context.Background(), Event{Name: EventTimeout, Duration: time.Second, Err: errors.New("late"), Reason: "x"})
	out := buf.String()
	for _, want := range []string{"level=WARN", "event=OnTimeout", "pipeline=api", "strategy=Timeout", "duration=1s", "error=late", "reason=x"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
}

func TestZeroTelemetryIsSilent(t *testing.T) {
	var tel Telemetry
	if tel.Enabled() {
		t.Fatal("zero Telemetry enabled")
	}
	tel.Emit(context.Background(), Event{Name: EventTimeout}) // must not panic
	if NewSlogListener(nil) == nil {
		t.Fatal("nil logger should fall back to slog.Default")
	}
}
