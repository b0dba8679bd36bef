package resilience

import (
	"context"
	"errors"
	"strconv"

	"github.com/ylcnfrht/resilience/core/event"
)

// LimitOutcome is how an adaptive limiter counts one finished execution;
// an unknown value counts as a sample.
type LimitOutcome uint8

const (
	// LimitSampled: the execution's round-trip time is a latency sample.
	LimitSampled LimitOutcome = iota
	// LimitDropped: the execution is a sign of overload (it timed out); the
	// algorithms lower the limit on it.
	LimitDropped
	// LimitIgnored: the execution says nothing about the service's
	// capacity (the request was invalid, the connection was taken over);
	// no sample.
	LimitIgnored
	// LimitAbandoned: the caller left before the execution finished. The
	// limiter decides: a caller that left after the execution had run
	// longer than twice the latency the limiter considers normal (its
	// slowly rising baseline of window mean round-trip times) is evidence
	// of overload and counts as a drop; one that left sooner (a user who
	// navigated away) says nothing and is ignored. Without a baseline yet,
	// or for an execution that was not timed (see AdaptiveLimiter), it is
	// ignored; a timed one weighs as many drops as the executions it
	// stands for.
	LimitAbandoned
)

// String returns "sample", "drop", "ignore" or "abandon".
func (o LimitOutcome) String() string {
	switch o {
	case LimitSampled:
		return "sample"
	case LimitDropped:
		return "drop"
	case LimitIgnored:
		return "ignore"
	case LimitAbandoned:
		return "abandon"
	}
	return "LimitOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Classifier decides how an adaptive limiter counts an execution: ctx is
// the context the limiter ran it with and err what the rest of the
// pipeline returned. It runs on every execution, so it must be fast, and
// safe for concurrent use; an unknown result counts as a sample. If it
// panics, the permit is returned without a sample and the panic
// propagates.
type Classifier func(ctx context.Context, err error) LimitOutcome

// DefaultClassify is the classifier an adaptive limiter uses unless told
// otherwise:
//
//   - success is a sample;
//   - the limiter's own context reaching its deadline (an outer timeout
//     strategy, the inbound timeout, the caller's deadline), a
//     *TimeoutRejectedError from a timeout strategy inside, or a
//     context.DeadlineExceeded returned by the callback is a drop: timeouts
//     are overload, and ignoring them lets the limit climb while every
//     execution times out;
//   - the limiter's context cancelled (the client went away) is
//     LimitAbandoned: overload evidence if the client had waited longer
//     than the limiter expects, ignored otherwise;
//   - a rejection by a strategy inside (ErrRejected) is ignored: it did not
//     measure the service;
//   - any other error is a sample: a failing execution still took time.
func DefaultClassify(ctx context.Context, err error) LimitOutcome {
	if err == nil {
		return LimitSampled
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return LimitDropped
	case context.Canceled:
		return LimitAbandoned
	}
	if errors.Is(err, ErrTimeoutRejected) || errors.Is(err, context.DeadlineExceeded) {
		return LimitDropped
	}
	if errors.Is(err, ErrRejected) || errors.Is(err, context.Canceled) {
		return LimitIgnored
	}
	return LimitSampled
}

// callClassifier runs classify for one execution: a panic of the
// classifier is reported on tel as event.HookPanic (event.HookClassifier) and
// then goes on to the execution's caller unchanged.
func callClassifier(ctx context.Context, tel Telemetry, classify Classifier, err error) LimitOutcome {
	defer reportHookPanic(ctx, &tel, event.HookClassifier)
	return classify(ctx, err)
}

// abandonFactor is how many times the baseline a caller must have waited
// for its leaving to count as overload.
const abandonFactor = 2

// resolveAbandoned decides how a LimitAbandoned execution counts: as
// weight drops when it was timed and ran longer than abandonFactor times
// baseRTT (its leaving is evidence of overload), and as LimitIgnored when
// it was untimed (weight 0), there is no baseline yet (baseRTT 0) or it
// left sooner. ran is how long it ran. Other outcomes count as they are,
// with weight 1.
func resolveAbandoned(o LimitOutcome, weight, ran, baseRTT int64) (LimitOutcome, int64) {
	if o != LimitAbandoned {
		return o, 1
	}
	// Only a timed execution knows how long it ran; it stands for weight
	// executions, as in the mean.
	if weight == 0 || baseRTT == 0 || ran <= abandonFactor*baseRTT {
		return LimitIgnored, 1
	}
	return LimitDropped, weight
}
