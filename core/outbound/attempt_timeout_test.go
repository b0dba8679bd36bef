package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// Invariant: AttemptTimeout ends an attempt whose headers do not arrive in
// time with a *TimeoutRejectedError that the retry handles, and the next
// attempt answers; the returned body stays readable after RoundTrip.
func TestTransportAttemptTimeoutRetriesSlowAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				<-r.Context().Done() // a hung dependency
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: &ctxBody{ctx: r.Context(), r: strings.NewReader("ok")}}, nil
		})
		tr, err := New(Options{Base: base, AttemptTimeout: time.Second,
			Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(2)))})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second || calls.Load() != 2 {
			t.Fatalf("answered after %v and %d calls; want 1s and 2", took, calls.Load())
		}
		time.Sleep(5 * time.Second) // long past the attempt timeout: the body is still readable
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "ok" {
			t.Fatalf("body %q, %v", body, err)
		}
	})
}

// Invariant: when every attempt runs out, the caller gets the typed
// timeout (errors.Is ErrTimeoutRejected), not a cancellation.
func TestTransportAttemptTimeoutError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		})
		tr, err := New(Options{Base: base, AttemptTimeout: 200 * time.Millisecond,
			Pipeline: pipeline(t, resilience.NewBuilder[*http.Response]().AddRetry(fastRetry(1)))})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
		_, err = tr.RoundTrip(req)
		var te *resilience.TimeoutRejectedError
		if !errors.As(err, &te) || te.Timeout != 200*time.Millisecond || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want a *TimeoutRejectedError of 200ms", err)
		}
	})
}

// Invariant: a negative AttemptTimeout is a *ConfigError naming the field
// as Type.Field, as every ConfigError does.
func TestTransportAttemptTimeoutValidation(t *testing.T) {
	_, err := New(Options{AttemptTimeout: -time.Second})
	var ce *resilience.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Options.AttemptTimeout" {
		t.Fatalf("err = %v", err)
	}
}

// Invariant: a pipeline holding a Timeout strategy is refused, naming
// Options.Pipeline, since its end would cut off the response body; the
// same pipeline without it is accepted.
func TestTransportRefusesPipelineWithTimeout(t *testing.T) {
	withTimeout, err := resilience.NewBuilder[*http.Response]().
		AddRetry(RetryOptions()).
		AddTimeout(resilience.TimeoutOptions{Timeout: time.Second}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Pipeline: withTimeout})
	var ce *resilience.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Options.Pipeline" {
		t.Fatalf("a pipeline with a Timeout: err = %v, want a *ConfigError naming Options.Pipeline", err)
	}
	without, err := resilience.NewBuilder[*http.Response]().AddRetry(RetryOptions()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Pipeline: without}); err != nil {
		t.Fatalf("a pipeline without a Timeout: %v", err)
	}
}
