package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/property"
)

func ExampleNewBuilder() {
	p, err := resilience.NewBuilder[string](resilience.WithName("greeter")).
		AddTimeout(resilience.TimeoutOptions{Timeout: time.Second}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	msg, err := p.Execute(context.Background(), func(ctx context.Context) (string, error) {
		return "hello", nil
	})
	fmt.Println(msg, err)
	// Output: hello <nil>
}

func ExampleBuilder_Build_invalidOptions() {
	_, err := resilience.NewBuilder[int]().AddTimeout(resilience.TimeoutOptions{Timeout: -time.Second}).Build()
	var ce *resilience.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output: true TimeoutOptions.Timeout
}

func ExampleNewKey() {
	tenant := property.NewKey[string]("tenant")
	ctx := tenant.With(context.Background(), "acme")
	p, _ := resilience.NewBuilder[string]().Build()
	who, _ := p.Execute(ctx, func(ctx context.Context) (string, error) {
		v, _ := tenant.Value(ctx)
		return v, nil
	})
	fmt.Println(who)
	// Output: acme
}

// A custom strategy that calls a user's hook reports the hook's panic the
// way core's strategies do, then decides what becomes of it.
func ExampleTelemetry_EmitHookPanic() {
	tel := resilience.NewTelemetry("checkout", "MyStrategy", event.ListenerFunc(func(_ context.Context, e event.Event) {
		var hp *resilience.HookPanicError
		fmt.Println(e.Name, e.Pipeline, e.Strategy, e.Reason, errors.As(e.Err, &hp))
	}))
	tel.EmitHookPanic(context.Background(), event.HookKey, "a bug")
	// Output: OnHookPanic checkout MyStrategy Key true
}
