package resilienceredis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// RedisLogger is a go-redis logger (redis.SetLogger accepts it) that
// writes go-redis's lines to a *slog.Logger at Warn, with the attribute
// component=go-redis, instead of go-redis's default: stderr, one line per
// failed dial during an outage.
//
// go-redis has one logger per process, so the store never sets it: call
//
//	redis.SetLogger(resilienceredis.NewRedisLogger(logger))
//
// once in main, where replacing a process-wide setting is expected.
type RedisLogger struct{ l *slog.Logger }

// NewRedisLogger returns a RedisLogger writing to l; nil means
// slog.Default() at the time of each line.
func NewRedisLogger(l *slog.Logger) *RedisLogger { return &RedisLogger{l} }

// Printf implements go-redis's logging interface.
func (r *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	l := r.l
	if l == nil {
		l = slog.Default()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	msg := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), "\n")
	l.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("component", "go-redis"))
}
