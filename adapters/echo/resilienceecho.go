// Package resilienceecho puts resilience's inbound load shedding in front
// of echo routes.
package resilienceecho

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Context returns the echo.Context of the request that a priority
// function, a rate-limit key function or a custom pipeline's strategy is
// running for, from the ctx it was given. Use it on that call's goroutine,
// while the call runs: echo recycles the context once the request ends.
func Context(ctx context.Context) (echo.Context, bool) {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	c, ok := r.Raw.(echo.Context)
	return c, ok
}
