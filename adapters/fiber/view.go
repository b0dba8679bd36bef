package resiliencefiber

import (
	"context"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// newView builds the neutral view of c. fasthttp reuses the buffers behind
// the strings fiber returns once the request ends, and a key or priority
// function may keep what it reads (the rate limiter keeps keys), so every
// string in the view is a copy or a constant.
func (m *Middleware) newView(c *fiber.Ctx) *inbound.Request {
	rc := c.Context()
	return &inbound.Request{
		Method:     method(c.Method()),
		Path:       strings.Clone(c.Path()),
		Route:      m.route(c),
		RemoteAddr: rc.RemoteAddr().String(),
		Header:     headers{h: &rc.Request.Header},
		Raw:        c,
	}
}

// method returns the method as a constant string for the standard
// methods, a copy otherwise.
func method(m string) string {
	switch m {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodPatch:
		return http.MethodPatch
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	}
	return strings.Clone(m)
}

// headers reads the request's header fields as copies: fasthttp's values
// live in buffers the next request overwrites.
type headers struct{ h *fasthttp.RequestHeader }

func (h headers) Get(name string) string { return string(h.h.Peek(name)) }

func (h headers) Values(name string) []string {
	var vs []string
	for _, v := range h.h.PeekAll(name) {
		vs = append(vs, string(v))
	}
	return vs
}

// CtxFrom returns the *fiber.Ctx of the request whose view ctx carries,
// for priority and key functions that need more than the neutral view
// (inbound.RequestFrom). It is valid only while the function runs, and
// what it returns (c.Get, c.Params, c.Path) lives in buffers fasthttp
// reuses for the next request: copy a string you keep (strings.Clone).
// Rate-limit keys are copied by the middleware.
func CtxFrom(ctx context.Context) (*fiber.Ctx, bool) {
	r, ok := inbound.RequestFrom(ctx)
	if !ok {
		return nil, false
	}
	c, ok := r.Raw.(*fiber.Ctx)
	return c, ok
}
