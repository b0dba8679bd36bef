// Command dependency shows the per-dependency concurrency limiter +
// fallback recipe and deadline propagation from an inbound request to the
// calls it makes.
//
//	go run ./examples/dependency -rec-latency 1s
//
// It starts two servers on loopback: a fake "recommendations" service
// whose answers take -rec-latency, and the front server, behind the
// inbound middleware (5 s timeout, 200 permits, a queue of 100). The first
// line on stdout is "listening on http://HOST:PORT" for the front server.
//
//   - GET /product/{id} renders a product page. Its recommendations come
//     through a pipeline of fallback → concurrency limiter (20, no queue) →
//     timeout (300 ms): when the service is slow or its 20 slots are busy
//     the page still renders, with an empty list, in about 300 ms at most.
//   - GET /report calls a report endpoint of the same service that never
//     answers. The handler passes only its request's context; when the
//     inbound 5 s deadline passes, the middleware answers 504 and the
//     nested call stops, and the service sees its request cancelled.
//
// SIGINT or SIGTERM shuts both servers down.
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
