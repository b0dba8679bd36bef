package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/property"
)

func ExampleConcurrencyLimiter() {
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{
		Name:        "reports",
		PermitLimit: 1, // one report at a time, no queue
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := resilience.NewBuilder[string]().AddStrategy(limiter).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	out, err := p.Execute(ctx, func(ctx context.Context) (string, error) {
		// While this runs the only permit is taken, so another execution
		// is shed at once.
		_, err := p.Execute(ctx, func(context.Context) (string, error) { return "never runs", nil })
		var rejected *resilience.ConcurrencyLimitRejectedError
		if errors.As(err, &rejected) {
			fmt.Println("second execution rejected:", rejected.Reason)
		}
		fmt.Printf("while running: %+v\n", limiter.Stats())
		return "report ready", nil
	})
	fmt.Println(out, err)
	fmt.Printf("afterwards: %+v\n", limiter.Stats())
	// Output:
	// second execution rejected: full
	// while running: {Limit:1 InFlight:1 Queued:0 Flows:0 LargestFlowShare:0}
	// report ready <nil>
	// afterwards: {Limit:1 InFlight:0 Queued:0 Flows:0 LargestFlowShare:0}
}

// Queued executions are granted by priority (lower first), then in arrival
// order.
func ExampleConcurrencyLimiter_priority() {
	tier := property.NewKey[int]("tier")
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{
		PermitLimit:  1,
		QueueLimit:   10,
		QueueTimeout: time.Minute,
		Priority: func(ctx context.Context) int {
			t, _ := tier.Value(ctx)
			return t
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	held, err := limiter.Acquire(context.Background()) // hold the only permit
	if err != nil {
		fmt.Println(err)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []string
	for i, req := range []struct {
		name string
		tier int
	}{{"batch-1", 2}, {"user-1", 0}, {"batch-2", 2}, {"user-2", 0}, {"internal", 1}} {
		wg.Go(func() {
			p, err := limiter.Acquire(tier.With(context.Background(), req.tier))
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			order = append(order, req.name)
			mu.Unlock()
			p.Release()
		})
		for limiter.Stats().Queued <= i { // wait until it has queued, to fix the arrival order
			runtime.Gosched()
		}
	}
	held.Release()
	wg.Wait()
	fmt.Println(order)
	// Output: [user-1 user-2 internal batch-1 batch-2]
}

func ExampleParseOverflowPolicy() {
	policy, err := resilience.ParseOverflowPolicy("drop-lowest-priority")
	fmt.Println(policy, err)
	_, err = resilience.ParseOverflowPolicy("drop-newest")
	fmt.Println(err)
	// Output:
	// drop-lowest-priority <nil>
	// resilience: invalid option ConcurrencyLimiterOptions.Overflow: unknown overflow policy "drop-newest"; want one of "reject-new", "drop-oldest", "drop-lowest-priority"
}

// The fixed and the adaptive limiter take and return permits the same
// way: TryAcquire never queues, Acquire may, and the permit is released
// once; the adaptive permit's Release takes the outcome the limit learns
// from.
func ExampleConcurrencyLimiter_TryAcquire() {
	fixed, _ := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{PermitLimit: 1})
	adaptive, _ := resilience.NewAdaptiveLimiter(resilience.AdaptiveLimiterOptions{InitialLimit: 1, IgnoreCPUWait: true})

	p, ok := fixed.TryAcquire()
	_, again := fixed.TryAcquire()
	fmt.Println("fixed:", ok, again)
	p.Release()

	q, ok := adaptive.TryAcquire()
	_, again = adaptive.TryAcquire()
	fmt.Println("adaptive:", ok, again)
	_ = q.Release(resilience.LimitSampled)
	// Output:
	// fixed: true false
	// adaptive: true false
}
