// Command server is the reference server: the inbound middleware in front
// of a few routes that simulate work, for demos and for outside tools
// (load generators, the conformance scripts) to drive.
//
//	go run ./examples/server -permit-limit 50 -queue-limit 20 -timeout 2s
//
// The first line on stdout is "listening on http://HOST:PORT" (the default
// -addr 127.0.0.1:0 picks a free port; with -framework grpc, "listening on
// HOST:PORT (gRPC, plaintext)"); then a summary of the configuration and
// curl lines to try (grpcurl lines with grpc, which registers server
// reflection: its .proto is examples/server/proto/resilience/example/v1/work.proto). An invalid flag value exits with status 2 and a
// message naming the flag (an -addr it cannot listen on, with status 1).
// SIGINT or SIGTERM shuts it down cleanly, in the order a load balancer
// needs: /readyz (a ready.Probe, outside the middleware; with grpc,
// the health service's every status NOT_SERVING) fails at once while
// requests are still served for -ready-delay (0; in Kubernetes, longer
// than the readiness probe's period, so the endpoints drop the pod
// first); then the middleware is drained (queued requests and new
// arrivals get 503 BULKHEAD_FULL, reason shutting-down, at once, with
// Connection: close, and the server's keep-alives are switched off so
// the running requests' answers close their connections too), and
// running requests get up to 5 s to finish. With grpc, open health Watch
// streams are ended (UNAVAILABLE) before GracefulStop, which would
// otherwise wait for them.
//
// Flags: -framework chi, echo, fiber, gin, connect or grpc (each adapter
// registers itself in framework_NAME.go; grpc serves the work as gRPC
// methods on grpc-go's own server, with the health service outside the
// middleware, instead of HTTP routes); -addr; -timeout (5s); -permit-limit (200);
// -queue-limit (100); -queue-timeout (500ms);
// -overflow reject-new|drop-oldest|drop-lowest-priority (the last by
// default: a full queue of X-Priority 5 cannot turn a 0 away); -adaptive (the
// adaptive limiter, -permit-limit its initial limit); -codel; -rate-limit N
// (0, none) with -rate-window (1s) and -rate-key ip|header:NAME;
// -shadow and -shadow-share N (every stage decides and counts, enforcing
// none, or all but N percent); -ready-delay (0); -config FILE;
// -debug-addr ADDR (none).
//
// -debug-addr ADDR opens a second listener, plain HTTP, with /debug/limits,
// /readyz and /healthz (outside the middleware, as on the main listener)
// and nothing else: with -framework grpc, whose listener speaks gRPC only,
// it is where the live statistics and an HTTP readiness probe are; with
// the other frameworks it keeps them off the public port too. It is off
// by default, so that a gRPC server opens no port it was not given
// (127.0.0.1:0 picks a free one). Its address is printed after the
// routes ("debug listener on http://HOST:PORT ..."); one it cannot listen
// on exits with status 1. At shutdown its /readyz fails with the main
// one, and it closes last, after the drain. It cannot change on reload.
//
// -config FILE reads flag values from a YAML or JSON file whose keys are
// the flags' names (permit-limit: 50, queue-timeout: 200ms); a flag given
// on the command line wins. SIGHUP reloads the file and applies it live
// (inbound.Middleware.Reconfigure): running requests keep their permits,
// a smaller queue refuses its excess with 503 dropped. A bad file (a value
// a flag refuses, an unknown key, or framework, addr, adaptive,
// rate-key, ready-delay or debug-addr changed, or rate-limit turned on or
// off, which need a restart) is logged to stderr with the key's name and
// changes nothing. The file is the whole configuration: a key it no
// longer has goes back to its flag's default on reload. With -adaptive,
// permit-limit is only the initial limit: a reload leaves the learnt
// limit where it is.
//
// Routes: /healthz and /debug/limits are outside the middleware, so they
// answer while the server is saturated; /debug/limits is the middleware's
// live statistics as JSON (limit, inflight, queued, late, lateTotal, the
// request counts), with the configuration in force ("config") and the
// -config reloads ("reloads": ok, failed).
// /readyz is the readiness probe, outside the middleware too.
// /work?ms=N sleeps N milliseconds ignoring its context; /cooperative?ms=N
// stops when its context is done; /export?ms=N works like /work but costs
// 10 permits and 10 rate-limit tokens (1 permit with -adaptive, which has
// no cost). N defaults to 100 and is at most 60000. With -framework grpc
// there are no HTTP routes: the work is the WorkService methods, and
// /debug/limits and /readyz are served only on -debug-addr.
// A request's X-Priority header (0 to 9, lower runs sooner when it has
// to queue) sets its priority; anything else, missing, malformed or out of
// range, means 5.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
