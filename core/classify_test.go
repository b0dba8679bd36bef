package resilience

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDefaultClassify(t *testing.T) {
	bg := context.Background()
	dl, cancel := context.WithDeadline(bg, time.Unix(0, 0))
	defer cancel()
	cc, cancel2 := context.WithCancel(bg)
	cancel2()
	other := errors.New("boom")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want LimitOutcome
	}{
		{"success", bg, nil, LimitSampled},
		{"error", bg, other, LimitSampled},
		{"own deadline", dl, context.DeadlineExceeded, LimitDropped},
		{"inner timeout strategy", bg, &TimeoutRejectedError{Timeout: time.Second}, LimitDropped},
		{"inner deadline", bg, context.DeadlineExceeded, LimitDropped},
		{"caller cancelled", cc, context.Canceled, LimitAbandoned},
		{"inner rejection", bg, errLimitFull, LimitIgnored},
	} {
		if got := DefaultClassify(c.ctx, c.err); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if LimitOutcome(9).String() != "LimitOutcome(9)" || LimitDropped.String() != "drop" {
		t.Error("LimitOutcome.String")
	}
}

// An abandoned execution counts as drops, as many as it stands for, only
// when it was timed and ran past twice the baseline; otherwise it is
// ignored. Every other outcome counts as it is, once.
func TestResolveAbandoned(t *testing.T) {
	const base = int64(10 * time.Millisecond)
	for _, c := range []struct {
		name              string
		o                 LimitOutcome
		weight, ran, base int64
		want              LimitOutcome
		wantWeight        int64
	}{
		{"sample passes", LimitSampled, 16, 3 * base, base, LimitSampled, 1},
		{"drop passes", LimitDropped, 1, 0, base, LimitDropped, 1},
		{"ignore passes", LimitIgnored, 1, 0, base, LimitIgnored, 1},
		{"unknown passes", LimitOutcome(9), 1, 0, base, LimitOutcome(9), 1},
		{"left late, timed in full", LimitAbandoned, 1, 2*base + 1, base, LimitDropped, 1},
		{"left late, sparsely timed", LimitAbandoned, sparseEvery, 3 * base, base, LimitDropped, sparseEvery},
		{"left at twice the baseline", LimitAbandoned, 1, 2 * base, base, LimitIgnored, 1},
		{"left early", LimitAbandoned, 1, base, base, LimitIgnored, 1},
		{"untimed", LimitAbandoned, 0, 0, base, LimitIgnored, 1},
		{"no baseline yet", LimitAbandoned, 1, 3 * base, 0, LimitIgnored, 1},
	} {
		o, w := resolveAbandoned(c.o, c.weight, c.ran, c.base)
		if o != c.want || w != c.wantWeight {
			t.Errorf("%s: got %v × %d, want %v × %d", c.name, o, w, c.want, c.wantWeight)
		}
	}
}
