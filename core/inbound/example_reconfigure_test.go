package inbound_test

import (
	"errors"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// Reconfigure takes a whole new option set while the middleware serves:
// here the permit limit goes from 50 to 7 during an incident. An invalid
// set (a negative limit) or one that changes what cannot change live (a
// stage added) is refused naming the field, and the old one stays.
func ExampleMiddleware_Reconfigure() {
	opts := func(limit int) inbound.Options {
		return inbound.Options{
			Timeout:     2 * time.Second,
			Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: limit, QueueLimit: 10, QueueTimeout: 500 * time.Millisecond},
		}
	}
	m, err := inbound.New(opts(50))
	if err != nil {
		panic(err)
	}
	fmt.Println("limit", m.Stats().Limit)

	if err := m.Reconfigure(opts(7)); err != nil {
		panic(err)
	}
	fmt.Println("limit", m.Stats().Limit)

	var ce *resilience.ConfigError
	err = m.Reconfigure(opts(-3))
	fmt.Println(errors.As(err, &ce), ce.Field)

	added := opts(7)
	added.RateLimit = &resilience.RateLimiterOptions{PermitLimit: 100, Window: time.Second}
	err = m.Reconfigure(added)
	fmt.Println(errors.Is(err, resilience.ErrNotLive), err)

	s := m.Stats()
	fmt.Println("limit", s.Limit, "applied", s.Reconfigured, "refused", s.ReconfigureRefused)
	// Output:
	// limit 50
	// limit 7
	// true ConcurrencyLimiterOptions.PermitLimit
	// true resilience: Options.RateLimit cannot change while in use: was nil at New; a stage cannot be added live
	// limit 7 applied 1 refused 2
}
