package resiliencefiber_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v2"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// A rate limit per route: the middleware is part of the route, so the key
// function sees fiber's pattern in the neutral format.
func Example() {
	mw, err := resiliencefiber.New(inbound.Options{
		Timeout:     5 * time.Second,
		Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 100, QueueLimit: 50, QueueTimeout: 500 * time.Millisecond},
		RateLimit: &resilience.RateLimiterOptions{
			PermitLimit: 2,
			Window:      time.Minute,
			Key: func(ctx context.Context) string {
				r, _ := inbound.RequestFrom(ctx)
				return r.Route() // "/users/{id}" for every user
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	app := fiber.New()
	app.Get("/healthz", func(c *fiber.Ctx) error { return nil }) // never shed
	app.Get("/users/:id", mw.Handler, func(c *fiber.Ctx) error {
		return c.SendString("user " + c.Params("id"))
	})
	resiliencefiber.ServeOnTime(app)

	for _, path := range []string{"/users/1", "/users/2", "/users/3", "/healthz"} {
		resp, err := app.Test(httptest.NewRequest("GET", path, nil))
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, resp.Header.Get("RateLimit-Remaining"), string(body))
	}
	// Output:
	// /users/1 200 1 user 1
	// /users/2 200 0 user 2
	// /users/3 429 0 {"statusCode":429,"error":"Too Many Requests","message":"Too many requests; retry after the time in Retry-After.","code":"RATE_LIMITED"}
	// /healthz 200
}

// Invalid options are reported when the middleware is built, naming the
// field.
func ExampleNew_invalid() {
	_, err := resiliencefiber.New(inbound.Options{Timeout: -time.Second})
	fmt.Println(err)
	// Output:
	// resilience: invalid option Options.Timeout: must be between 0 (no timeout) and 876000h0m0s, got -1s
}
