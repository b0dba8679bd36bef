// Package adapt is the kit for writing an adapter: what connects one web
// or RPC framework to the inbound middleware. A service owner never needs
// it; they configure inbound.Options and use their framework's adapter
// (adapters/chi, gin, echo, fiber, connect, grpc) or inbound.Middleware's
// Handler.
//
// An adapter builds a Kit with New, describing its framework once
// (Framework: how to resolve the route pattern, fill the request view,
// set a response header), and per request calls one entry point with the
// framework's own object as raw: Kit.Serve for a framework on net/http,
// Kit.ServeAnswering for one that answers a deadline in its own protocol,
// Kit.ExecuteInPlace or Kit.Execute for one that is not on net/http. It
// renders what they return with Kit.Render or Kit.RenderServe, through
// the framework's own error flow; an RPC adapter maps them to statuses
// with RPCStatusOf, and an adapter answering in a format of its own lets
// Options.Render restyle that answer with Kit.Restyle
// (Framework.RenderOwn). Go and Handoff run a handler on a
// goroutine of its own while the deadline is answered; ColonRoute,
// BraceRoute and PatternRoute convert the framework's route patterns to
// the one format of inbound.Request.Route.
//
// The conformance suite (module conformance, conformance.Run) checks an
// adapter against the behaviour every adapter shares; "Writing an
// adapter" in docs/guide.md walks through one.
package adapt
