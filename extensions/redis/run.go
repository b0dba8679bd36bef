package resilienceredis

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/ylcnfrht/resilience/core/ratelimit"
)

// luaScript is a script and its source, for the EVAL that loads it when
// the server does not know its hash.
type luaScript struct {
	*redis.Script
	src string
}

func newLuaScript(src string) *luaScript { return &luaScript{redis.NewScript(src), src} }

// takeCmd is a script run that go-redis must not retry. go-redis retries
// a CLUSTERDOWN, a refused connection or a timeout after a back-off; within
// a budget of milliseconds the retry cannot succeed, and the budget then
// ends in the back-off with only the context's error, hiding the cause.
// Redirects (MOVED, ASK) are still followed: they are not retries.
type takeCmd struct{ *redis.Cmd }

func (takeCmd) NoRetry() bool { return true }

// run runs script once (EVALSHA, then EVAL if the server lacks it) and
// returns its reply. Without retries from go-redis, it tries once more
// itself after a connection that failed at once (a pooled connection the
// server had closed), while the budget lasts.
func (s *Store) run(ctx context.Context, script *luaScript, keys []string, args []any) ([]int64, error) {
	if s.proc == nil || s.retried {
		return script.Run(ctx, s.client, keys, args...).Int64Slice()
	}
	v, err := s.eval(ctx, script, keys, args)
	if err != nil && ctx.Err() == nil && reasonOf(err) == ratelimit.StoreConnectionRefused {
		v, err = s.eval(ctx, script, keys, args)
	}
	return v, err
}

func (s *Store) eval(ctx context.Context, script *luaScript, keys []string, args []any) ([]int64, error) {
	v, err := s.evalCmd(ctx, "evalsha", script.Hash(), keys, args)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = s.evalCmd(ctx, "eval", script.src, keys, args)
	}
	return v, err
}

func (s *Store) evalCmd(ctx context.Context, name, script string, keys []string, args []any) ([]int64, error) {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	_ = s.proc.Process(ctx, takeCmd{cmd})
	return cmd.Int64Slice()
}
