package retryafter_test

import (
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/retryafter"
)

func ExampleParse() {
	d, ok := retryafter.Parse("120", time.Now())
	fmt.Println(d, ok)
	// Output: 2m0s true
}

func ExampleParsePushback() {
	d, ok := retryafter.ParsePushback("250")
	fmt.Println(d, ok)
	_, ok = retryafter.ParsePushback("-1") // gRPC: do not retry
	fmt.Println(ok)
	// Output:
	// 250ms true
	// false
}

// A rate limiter's rejection carries the wait until its next permit; Of
// reads it through any wrapping, and Delay makes a Retry wait that long.
func ExampleOf() {
	err := fmt.Errorf("search: %w", &resilience.RateLimitRejectedError{RetryAfter: 3 * time.Second})
	d, ok := retryafter.Of(err)
	fmt.Println(d, ok)
	_ = resilience.RetryOptions[string]{MaxRetryAttempts: 2, DelayGenerator: retryafter.Delay[string]}
	// Output: 3s true
}

// Format writes the wait a rejection asks for, in whole seconds rounded up.
func ExampleFormat() {
	fmt.Println(retryafter.Format(300*time.Millisecond), retryafter.Format(2100*time.Millisecond), retryafter.Format(0))
	// Output: 1 3 1
}
