package resilienceredis

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers (go-redis's
// goroutines, a server's error log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRedisLoggerRoutesDialErrorsToSlog protects the promise that an
// outage logs through the service's slog, not stderr: go-redis logs each
// failed dial, and with NewRedisLogger set those lines reach the slog
// handler at Warn; the take's error names its cause, connection-refused,
// and the store's own Logger is the one given.
func TestRedisLoggerRoutesDialErrorsToSlog(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	redis.SetLogger(NewRedisLogger(logger))
	defer redis.SetLogger(quietLogger{})

	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, DialerRetries: 1})
	defer client.Close()
	store, err := New(Options{Client: client, Budget: time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Take(context.Background(), "k", ratelimit.Policy{Name: "p", Limit: 1, Window: time.Second})
	if r := ratelimit.ReasonOf(err); r != ratelimit.StoreConnectionRefused {
		t.Fatalf("take against a closed port: cause %q (%v), want connection-refused", r, err)
	}
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "component=go-redis") || !strings.Contains(out, "dial") {
		t.Fatalf("slog got %q, want go-redis's dial error at Warn", out)
	}
}
