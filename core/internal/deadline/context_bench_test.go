package deadline

import (
	"context"
	"testing"
	"time"
)

// A request's parent is cancellable (net/http's request context is), so
// the watch on it is what a real Done pays for.
func benchParent(b *testing.B) context.Context {
	parent, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	return parent
}

// BenchmarkContextInitEnd is a handler that never waits on its context.
func BenchmarkContextInitEnd(b *testing.B) {
	parent := benchParent(b)
	at := time.Now().Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		var c Context
		c.Init(parent, at)
		c.End(context.Canceled, nil)
	}
}

// BenchmarkContextDoneEnd is a handler that waits on its context.
func BenchmarkContextDoneEnd(b *testing.B) {
	parent := benchParent(b)
	at := time.Now().Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		c := new(Context)
		c.Init(parent, at)
		_ = c.Done()
		c.End(context.Canceled, nil)
	}
}

// BenchmarkContextChildEnd is a handler that derives a context from its
// own (Done then AfterFunc, through the context package).
func BenchmarkContextChildEnd(b *testing.B) {
	parent := benchParent(b)
	at := time.Now().Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		c := new(Context)
		c.Init(parent, at)
		_, cancel := context.WithCancel(c)
		c.End(context.Canceled, nil)
		cancel()
	}
}

// BenchmarkContextAfterFuncEnd registers one function and ends.
func BenchmarkContextAfterFuncEnd(b *testing.B) {
	parent := benchParent(b)
	at := time.Now().Add(time.Hour)
	f := func() {}
	b.ReportAllocs()
	for b.Loop() {
		c := new(Context)
		c.Init(parent, at)
		c.AfterFunc(f)
		c.End(context.Canceled, nil)
	}
}
