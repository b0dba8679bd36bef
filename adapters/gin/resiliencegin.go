// Package resiliencegin puts resilience's inbound load shedding in front
// of gin routes.
package resiliencegin

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// Context returns the *gin.Context of the request that a priority
// function, a rate-limit key function or a custom pipeline's strategy is
// running for, from the ctx it was given. Use it on that call's goroutine
// only, while the call runs: gin recycles the *gin.Context once the
// request ends.
func Context(ctx context.Context) (*gin.Context, bool) {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	c, ok := r.Raw.(*gin.Context)
	return c, ok
}
