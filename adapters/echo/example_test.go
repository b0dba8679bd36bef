package resilienceecho_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// A rate limit per route pattern, keyed with echo's own context; the
// health route, outside the group, is never limited.
func Example() {
	mw, err := resilienceecho.New(inbound.Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 200, QueueLimit: 100, QueueTimeout: 500 * time.Millisecond},
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 2,
			Window:      time.Minute,
			Key: func(ctx context.Context) string {
				r, _ := inbound.RequestFrom(ctx)
				c, _ := resilienceecho.Context(ctx)
				return c.Request().Header.Get("X-Tenant") + " " + r.Route() // "acme /users/{id}"
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	e := echo.New()
	e.GET("/healthz", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	api := e.Group("", mw.Handler)
	api.GET("/users/:id", func(c echo.Context) error { return c.String(http.StatusOK, "user "+c.Param("id")) })

	for _, path := range []string{"/users/1", "/users/2", "/users/3", "/healthz"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("X-Tenant", "acme")
		e.ServeHTTP(rec, req)
		fmt.Println(path, rec.Code, rec.Header().Get("RateLimit-Remaining"))
	}
	// Output:
	// /users/1 200 1
	// /users/2 200 0
	// /users/3 429 0
	// /healthz 200
}

// Invalid options are reported when the middleware is built, naming the
// field.
func ExampleNew_invalid() {
	_, err := resilienceecho.New(inbound.Options{Timeout: -time.Second})
	fmt.Println(err)
	// Output:
	// resilience: invalid option Options.Timeout: must be between 0 (no timeout) and 876000h0m0s, got -1s
}
