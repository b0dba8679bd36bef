package worker

import (
	"context"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type taskFunc func()

func (f taskFunc) Run() { f() }

// idleWorkers is how many of Go's goroutines wait for a task.
func idleWorkers() int {
	workers.mu.Lock()
	defer workers.mu.Unlock()
	return len(workers.idle)
}

// waitIdle waits, without a wall-clock assertion, until n goroutines wait.
func waitIdle(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); idleWorkers() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait for a task, want %d", idleWorkers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGoReusesAFinishedGoroutine: a task given after another finished runs
// on the goroutine that ran the first (whose stack has grown), not on a
// new one: the one goroutine waiting after each task is the same.
func TestGoReusesAFinishedGoroutine(t *testing.T) {
	waitIdle(t, 0) // earlier tests' goroutines have left
	var first *worker
	for i := range 3 {
		done := make(chan struct{})
		Go(context.Background(), taskFunc(func() { close(done) }))
		<-done
		waitIdle(t, 1)
		workers.mu.Lock()
		w := workers.idle[0]
		workers.mu.Unlock()
		if i == 0 {
			first = w
		} else if w != first {
			t.Fatalf("task %d ran on a goroutine of its own, not the first task's", i)
		}
	}
}

// TestGoIdleGoroutinesLeave: a goroutine with no task for idleExit exits,
// so nothing of Go's outlives the traffic (goleak, which the package's
// TestMain runs, checks it too).
func TestGoIdleGoroutinesLeave(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 3 {
		wg.Add(1)
		Go(context.Background(), taskFunc(func() { defer wg.Done(); <-release }))
	}
	close(release)
	wg.Wait()
	waitIdle(t, 0)
}

// TestGoCarriesTheContextsLabels: the task runs with the profiler labels of
// the context it was given, and a reused goroutine does not keep those of
// the task before. Labels are read where pprof shows them: the goroutine
// profile.
func TestGoCarriesTheContextsLabels(t *testing.T) {
	waitIdle(t, 0)
	const label = `"route":"/go-labels-test"`
	labelled := func(ctx context.Context) bool {
		running, release := make(chan struct{}), make(chan struct{})
		Go(ctx, taskFunc(func() { close(running); <-release }))
		<-running
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		close(release)
		waitIdle(t, 1)
		return strings.Contains(b.String(), label)
	}
	pprof.Do(context.Background(), pprof.Labels("route", "/go-labels-test"), func(ctx context.Context) {
		if !labelled(ctx) {
			t.Error("the task does not carry its context's labels")
		}
	})
	if labelled(context.Background()) {
		t.Error("the next task on the same goroutine kept the labels of the one before")
	}
}

// TestGoInSynctestBubbleStartsFresh: inside a bubble Go never hands a task
// to a goroutine of the real clock's, nor keeps one of the bubble's: the
// bubble ends with no goroutine of its own left waiting.
func TestGoInSynctestBubbleStartsFresh(t *testing.T) {
	waitIdle(t, 0)
	synctest.Test(t, func(t *testing.T) {
		done := make(chan time.Time)
		Go(context.Background(), taskFunc(func() { done <- time.Now() }))
		if now := <-done; now != now.Round(0) {
			t.Errorf("the task read a real clock (%v) inside the bubble", now)
		}
	})
	if n := idleWorkers(); n != 0 {
		t.Errorf("%d goroutines wait after the bubble, want 0", n)
	}
}

// BenchmarkGo is one handoff to a goroutine of Go's and back, as fiber's
// OnTimeHandler makes for each request; BenchmarkGoStatement is the same
// with a go statement, its baseline.
func BenchmarkGo(b *testing.B) {
	done := make(chan struct{}, 1)
	t := taskFunc(func() { done <- struct{}{} })
	b.ReportAllocs()
	for b.Loop() {
		Go(context.Background(), t)
		<-done
	}
}

func BenchmarkGoStatement(b *testing.B) {
	done := make(chan struct{}, 1)
	t := taskFunc(func() { done <- struct{}{} })
	b.ReportAllocs()
	for b.Loop() {
		go t.Run()
		<-done
	}
}
