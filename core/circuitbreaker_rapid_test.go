package resilience

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// cbModel is the circuit breaker as the specification states it: counts
// since the window was last cleared, a state, the time a probe may run and
// an epoch bumped on every transition (outcomes of an older epoch are
// ignored). The test keeps all short sleeps inside one sampling bucket and
// makes long sleeps outlast the whole window, so plain counts are exact.
type cbModel struct {
	ratio       float64
	minThru     int
	brk         time.Duration
	state       CircuitState
	epoch       int
	until       time.Time
	total, fail int
}

func (m *cbModel) transition(s CircuitState) {
	m.state = s
	m.epoch++
	if s == CircuitClosed {
		m.total, m.fail = 0, 0
	}
}

// admit returns the epoch an execution belongs to, or the error expected.
func (m *cbModel) admit(now time.Time) (int, error) {
	switch m.state {
	case CircuitClosed:
		return m.epoch, nil
	case CircuitIsolated:
		return 0, errIsolatedCircuit
	}
	if now.Before(m.until) {
		left := m.until.Sub(now)
		if m.state == CircuitHalfOpen {
			left = 0
		}
		return 0, &BrokenCircuitError{RetryAfter: left}
	}
	m.transition(CircuitHalfOpen)
	m.until = now.Add(m.brk)
	return m.epoch, nil
}

func (m *cbModel) record(now time.Time, epoch int, failed bool) {
	if epoch != m.epoch {
		return
	}
	switch m.state {
	case CircuitClosed:
		m.total++
		if failed {
			m.fail++
			if m.total >= m.minThru && float64(m.fail)/float64(m.total) >= m.ratio {
				m.transition(CircuitOpen)
				m.until = now.Add(m.brk)
			}
		}
	case CircuitHalfOpen:
		if failed {
			m.transition(CircuitOpen)
			m.until = now.Add(m.brk)
		} else {
			m.transition(CircuitClosed)
		}
	}
}

// cbBubble hides that t is a *testing.T from rapid, which would otherwise
// call t.Deadline, which synctest bubbles forbid.
type cbBubble struct{ testing.TB }

// blocked is an execution held inside the callback until released.
type blocked struct {
	epoch    int
	admitted bool
	outcome  chan bool // true: fail
	err      chan error
}

// TestCircuitBreakerStateMachine drives a breaker with random successes,
// failures, executions held open across transitions, sleeps, Isolate and
// Close, and after every step compares its state and every returned error
// with the model: closed → open at the threshold, open rejects with the
// exact time left, a single probe in half-open, stale outcomes ignored.
func TestCircuitBreakerStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(cbBubble{t}, func(t *rapid.T) {
			m := &cbModel{
				ratio:   rapid.SampledFrom([]float64{0.1, 0.5, 1}).Draw(t, "ratio"),
				minThru: rapid.IntRange(2, 6).Draw(t, "minThroughput"),
				brk:     time.Second,
			}
			cb, err := NewCircuitBreaker(CircuitBreakerOptions[int]{FailureRatio: m.ratio, MinimumThroughput: m.minThru,
				SamplingDuration: 30 * time.Second, BreakDuration: m.brk})
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewBuilder[int]().AddResultStrategy(cb).Build()
			if err != nil {
				t.Fatal(err)
			}
			var held *blocked
			shortSlept := time.Duration(0)
			exec := func(t *rapid.T, failed bool) {
				epoch, want := m.admit(time.Now())
				_, got := p.Execute(context.Background(), func(context.Context) (int, error) {
					if failed {
						return 0, errDependency
					}
					return 1, nil
				})
				if want != nil {
					checkRejection(t, got, want)
					return
				}
				m.record(time.Now(), epoch, failed)
			}
			release := func(t *rapid.T, failed bool) {
				if held == nil {
					t.Skip("nothing held")
				}
				held.outcome <- failed
				err := <-held.err
				if held.admitted {
					m.record(time.Now(), held.epoch, failed)
				}
				held = nil
				_ = err
			}
			defer func() {
				if held != nil {
					held.outcome <- false
					<-held.err
				}
			}()
			t.Repeat(map[string]func(*rapid.T){
				"success": func(t *rapid.T) { exec(t, false) },
				"failure": func(t *rapid.T) { exec(t, true) },
				"hold": func(t *rapid.T) {
					if held != nil {
						t.Skip("one held at a time")
					}
					epoch, want := m.admit(time.Now())
					b := &blocked{epoch: epoch, admitted: want == nil, outcome: make(chan bool), err: make(chan error, 1)}
					started := make(chan struct{}, 1)
					go func() {
						_, err := p.Execute(context.Background(), func(context.Context) (int, error) {
							started <- struct{}{}
							if <-b.outcome {
								return 0, errDependency
							}
							return 1, nil
						})
						b.err <- err
					}()
					synctest.Wait()
					if want != nil {
						if len(started) != 0 {
							t.Fatal("rejected execution ran")
						}
						checkRejection(t, <-b.err, want)
						return
					}
					if len(started) != 1 {
						t.Fatal("admitted execution did not start")
					}
					held = b
				},
				"releaseSuccess": func(t *rapid.T) { release(t, false) },
				"releaseFailure": func(t *rapid.T) { release(t, true) },
				"sleepShort": func(t *rapid.T) {
					// Short sleeps stay within one 3 s bucket in total.
					d := time.Duration(rapid.IntRange(1, 600).Draw(t, "ms")) * time.Millisecond
					if shortSlept+d >= 2*time.Second {
						t.Skip("bucket budget spent")
					}
					shortSlept += d
					time.Sleep(d)
				},
				"sleepLong": func(t *rapid.T) {
					// Outlasts the window and its newest bucket: counts clear.
					time.Sleep(34 * time.Second)
					shortSlept = 0
					m.total, m.fail = 0, 0
				},
				"isolate": func(t *rapid.T) {
					cb.Isolate(context.Background())
					m.transition(CircuitIsolated)
				},
				"close": func(t *rapid.T) {
					cb.Close(context.Background())
					m.transition(CircuitClosed)
				},
				"": func(t *rapid.T) {
					if got := cb.State(); got != m.state {
						t.Fatalf("state %v, model %v", got, m.state)
					}
				},
			})
		})
	})
}

func checkRejection(t *rapid.T, got, want error) {
	var gb, wb *BrokenCircuitError
	switch {
	case errors.As(want, &wb):
		if !errors.As(got, &gb) || gb.RetryAfter != wb.RetryAfter {
			t.Fatalf("got %v, model expects %v", got, want)
		}
	case !errors.As(got, &gb) || !gb.Isolated:
		t.Fatalf("got %v, model expects %v", got, want)
	}
}
