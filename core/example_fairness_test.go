package resilience_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/property"
)

// With a Flow function, queued executions of one priority are granted
// across the flows in turn, FIFO within a flow, so a tenant with a
// backlog does not make the others wait behind it. (Behind an inbound
// middleware, by.Header or by.ClientIP (core/inbound/by) is the flow.)
func ExampleConcurrencyLimiterOptions_flow() {
	tenant := property.NewKey[string]("tenant")
	limiter, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{
		PermitLimit:  1,
		QueueLimit:   10,
		QueueTimeout: time.Minute,
		Flow: func(ctx context.Context) string {
			t, _ := tenant.Value(ctx)
			return t
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	release := make(chan struct{}) // one token per execution allowed to finish
	var mu sync.Mutex
	var order []string
	run := func(name string) {
		ctx := tenant.With(context.Background(), name[:len(name)-2])
		_ = limiter.Execute(ctx, resilience.Telemetry{}, func(context.Context) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			<-release
			return nil
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() { run("busy-0") }) // takes the only permit
	for limiter.Stats().InFlight == 0 {
		runtime.Gosched()
	}
	// The busy tenant queues three more before two others queue one each.
	for i, name := range []string{"busy-1", "busy-2", "busy-3", "calm-1", "idle-1"} {
		wg.Go(func() { run(name) })
		for limiter.Stats().Queued < i+1 {
			runtime.Gosched()
		}
	}
	for range 6 {
		release <- struct{}{}
	}
	wg.Wait()
	fmt.Println(order)
	// Output:
	// [busy-0 busy-1 calm-1 idle-1 busy-2 busy-3]
}
