// Package resiliencegin puts resilience's inbound load shedding in front
// of gin routes.
package resiliencegin

import (
	"context"

	"github.com/gin-gonic/gin"
)

// Context returns the *gin.Context of the request whose priority or key
// function (or custom pipeline strategy) runs with ctx.
func Context(ctx context.Context) (*gin.Context, bool) {
	if cl, ok := ctx.Value(callKey{}).(*call); ok {
		return cl.c, true
	}
	return nil, false
}
