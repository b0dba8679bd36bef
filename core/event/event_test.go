package event

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
	l.OnEvent(context.Background(), Event{Name: Timeout, Pipeline: "api", Strategy: "Timeout", Duration: time.Second, Err: errors.New("late"), Reason: "x"})
	out := buf.String()
	for _, want := range []string{"level=WARN", "event=OnTimeout", "pipeline=api", "strategy=Timeout", "duration=1s", "error=late", "reason=x"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
}

func TestSlogListenerNilLogger(t *testing.T) {
	if NewSlogListener(nil) == nil {
		t.Fatal("nil logger should fall back to slog.Default")
	}
}
