package event

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// The slog listener names a store failure's cause, so a log search finds
// the CLUSTERDOWNs apart from the timeouts.
func TestSlogListenerLogsStoreCause(t *testing.T) {
	var buf bytes.Buffer
	l := NewSlogListener(slog.New(slog.NewTextHandler(&buf, nil)))
	err := fmt.Errorf("store: %w", &ratelimit.StoreError{Reason: ratelimit.StoreConnectionRefused, Err: errors.New("dial: refused")})
	l.OnEvent(context.Background(), Event{Name: RateLimiterStoreError, Reason: "fail-closed", Err: err})
	l.OnEvent(context.Background(), Event{Name: RateLimiterRejected, Reason: ReasonRateLimited})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "cause=connection-refused") || strings.Contains(lines[1], "cause=") {
		t.Fatalf("log:\n%s", buf.String())
	}
}
