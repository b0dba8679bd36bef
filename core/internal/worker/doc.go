// Package worker holds the goroutines a timed request's work runs on
// while its own goroutine waits (Go, Task) and the handoff between the
// two (Handoff): the one way package inbound and its adapters answer a
// deadline while a handler runs on. Package adapt re-exports it for
// adapter authors.
package worker
