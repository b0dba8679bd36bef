package by_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"testing/synctest"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"github.com/ylcnfrht/resilience/core/inbound/by"
	"github.com/ylcnfrht/resilience/core/outbound"
)

func viewCtx(h http.Header) context.Context {
	return adapt.NewContext(context.Background(), &inbound.Request{Header: h})
}

func TestIsRetry(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{}, false},
		{http.Header{outbound.AttemptHeader: {"1"}}, true},
		{http.Header{outbound.AttemptHeader: {"12"}}, true},
		{http.Header{outbound.AttemptHeader: {"0"}}, false},
		{http.Header{outbound.AttemptHeader: {"-1"}}, false},
		{http.Header{outbound.AttemptHeader: {"x"}}, false},
		{http.Header{"Grpc-Previous-Rpc-Attempts": {"2"}}, true},
		{http.Header{"Grpc-Previous-Rpc-Attempts": {"0"}}, false},
	} {
		if got := by.IsRetry(viewCtx(tc.h)); got != tc.want {
			t.Errorf("IsRetry(%v) = %v", tc.h, got)
		}
	}
	if by.IsRetry(context.Background()) {
		t.Error("IsRetry without a view")
	}
}

// RetryPriority keeps the base order and puts a retry just after the
// first attempts of its own priority, before the next priority's.
func TestRetryPriorityOrder(t *testing.T) {
	base := func(ctx context.Context) int {
		r, _ := inbound.RequestFrom(ctx)
		if r.Header.Get("X-Class") == "low" {
			return 5
		}
		return 0
	}
	p := by.RetriesLast(base)
	first := p(viewCtx(http.Header{}))
	retry := p(viewCtx(http.Header{outbound.AttemptHeader: {"1"}}))
	lowFirst := p(viewCtx(http.Header{"X-Class": {"low"}}))
	if !(first < retry && retry < lowFirst) {
		t.Fatalf("first %d, retry %d, low first %d: want them in that order", first, retry, lowFirst)
	}
	extreme := by.RetriesLast(func(context.Context) int { return math.MaxInt })
	if extreme(viewCtx(http.Header{outbound.AttemptHeader: {"1"}})) <= extreme(viewCtx(http.Header{})) {
		t.Fatal("an extreme base priority overflowed")
	}
	if by.RetriesLast(nil)(viewCtx(http.Header{})) != 0 {
		t.Fatal("nil base is not priority 0")
	}
}

// With RetryPriority a full queue sheds a waiting retry for a newly
// arriving first attempt, and a freed permit goes to a first attempt
// before a retry that waited longer.
func TestRetryPriorityShedsRetriesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := resilience.NewConcurrencyLimiter(resilience.ConcurrencyLimiterOptions{
			PermitLimit: 1, QueueLimit: 2, Priority: by.RetriesLast(nil)})
		if err != nil {
			t.Fatal(err)
		}
		held, ok := l.TryAcquire()
		if !ok {
			t.Fatal("no permit")
		}
		retry := viewCtx(http.Header{outbound.AttemptHeader: {"1"}})
		first := viewCtx(http.Header{})
		got := make(chan string, 3)
		acquire := func(name string, ctx context.Context) {
			p, err := l.Acquire(ctx)
			if err != nil {
				var be *resilience.ConcurrencyLimitRejectedError
				if errors.As(err, &be) {
					got <- name + " " + string(be.Reason)
				}
				return
			}
			got <- name + " ran"
			p.Release()
		}
		go acquire("retry1", retry)
		synctest.Wait()
		go acquire("retry2", retry)
		synctest.Wait()
		go acquire("first", first) // the queue is full of retries: the newest goes
		synctest.Wait()
		if g := <-got; g != "retry2 dropped" {
			t.Fatalf("got %q, want the newest retry dropped", g)
		}
		held.Release()
		if a, b := <-got, <-got; a != "first ran" || b != "retry1 ran" {
			t.Fatalf("got %q then %q, want the first attempt served before the older retry", a, b)
		}
	})
}
