package resiliencefiber

import (
	"context"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// fillView fills the neutral view of a *fiber.Ctx. fasthttp reuses the
// buffers behind the strings fiber returns once the request ends, and a
// key or priority function may keep what it reads, so every string in the
// view is a copy or a constant.
func fillView(raw any, v *inbound.Request) {
	c := raw.(*fiber.Ctx)
	rc := c.Context()
	v.Method = method(c.Method())
	v.Path = strings.Clone(c.Path())
	v.RemoteAddr = rc.RemoteAddr().String()
	v.Header = headers{h: &rc.Request.Header}
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

// headerField is one response header field.
type headerField struct{ name, value string }

// rateFields copies the RateLimit fields set on c's response.
func rateFields(c *fiber.Ctx) []headerField {
	var fs []headerField
	h := &c.Response().Header
	for _, n := range adapt.RateLimitFields() {
		if v := h.Peek(n); v != nil {
			fs = append(fs, headerField{n, string(v)})
		}
	}
	return fs
}
