package inbound

import (
	"github.com/ylcnfrht/resilience/core/internal/config"
	"time"
)

// TimeoutStart says when Options.Timeout starts counting. Its values are
// stable strings for configuration files; "" means TimeoutFromArrival.
type TimeoutStart string

const (
	// TimeoutFromArrival (the default) counts the request's whole budget,
	// queue wait included: a request that waited 4 s of a 5 s Timeout has
	// 1 s left to run, so the client's answer comes within Timeout of its
	// arrival, whatever the queue did. The queue wait is therefore at
	// most Timeout: a QueueTimeout above it, or 0 (no limit), waits
	// Timeout at most, then refuses with reason queue-timeout. (Not a
	// configuration error: such configurations were valid before this
	// default, and bounding them keeps the promise the default makes.)
	TimeoutFromArrival TimeoutStart = "arrival"
	// TimeoutFromAdmission gives every admitted handler the full Timeout,
	// however long it queued. The latest answer a client can get is then
	// QueueTimeout + Timeout after its arrival: keep that sum below the
	// timeout of whoever calls you.
	TimeoutFromAdmission TimeoutStart = "admission"
)

var timeoutStarts = []TimeoutStart{TimeoutFromArrival, TimeoutFromAdmission}

// parseTimeoutStart returns the TimeoutStart named by s, by the rule of
// every Parse function in these packages: case, surrounding space and '_'
// for '-' are ignored, and "" is TimeoutFromArrival. Anything else is a
// *resilience.ConfigError that lists the accepted names.
func parseTimeoutStart(s string) (TimeoutStart, error) {
	if v, ok := config.ParseEnum(s, TimeoutFromArrival, timeoutStarts...); ok {
		return v, nil
	}
	return "", config.UnknownEnum("Options.TimeoutFrom", "timeout start", s, timeoutStarts...)
}

// validateBudget bounds the queue wait by a budget counted from arrival.
// The limiter options are copied before any change, never written
// through.
func (o *Options) validateBudget() error {
	start, err := parseTimeoutStart(string(o.TimeoutFrom))
	if err != nil {
		return err
	}
	o.TimeoutFrom = start
	if start != TimeoutFromArrival || o.Timeout == 0 {
		return nil
	}
	fit := func(qt *time.Duration) {
		// An out-of-range value is left for the limiter's own check to
		// refuse with a *ConfigError.
		if *qt == 0 || (*qt > o.Timeout && *qt <= maxTimeout) {
			*qt = o.Timeout
		}
	}
	if c := o.Concurrency; c != nil && c.QueueLimit > 0 {
		cc := *c
		fit(&cc.QueueTimeout)
		o.Concurrency = &cc
	}
	if a := o.Adaptive; a != nil && a.QueueLimit > 0 {
		aa := *a
		fit(&aa.QueueTimeout)
		o.Adaptive = &aa
	}
	return nil
}

// arrivalDeadline is the deadline of a request that must queue, when the
// budget counts from arrival; the zero Time otherwise.
func (m *Middleware) arrivalDeadline() time.Time {
	if !m.hasTimeout || m.opts.TimeoutFrom != TimeoutFromArrival {
		return time.Time{}
	}
	return time.Now().Add(m.tconf.Load().d)
}

// handlerDeadline is when an admitted request's Timeout ends: now plus
// Timeout, or its arrival deadline when that is sooner.
func handlerDeadline(now time.Time, timeout time.Duration, arrival time.Time) time.Time {
	dl := now.Add(timeout)
	if !arrival.IsZero() && arrival.Before(dl) {
		dl = arrival
	}
	return dl
}
