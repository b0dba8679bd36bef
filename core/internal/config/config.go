// Package config holds the option checking shared by package resilience
// and its leaf packages (limit, ratelimit): the one error type they all
// return for an invalid option, which package resilience re-exports as
// ConfigError, and the checks and enum parsing that build it.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid matches *Error; package resilience exports it as
// ErrInvalidOptions.
var ErrInvalid = errors.New("resilience: invalid options")

// Error reports an invalid option; package resilience exports it as
// ConfigError and documents it there.
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string {
	return "resilience: invalid option " + e.Field + ": " + e.Problem
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Errorf builds an *Error for field.
func Errorf(field, format string, args ...any) error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Rename returns err, an *Error, naming field instead: for a check whose
// error names another option (a Parse function's) reused for this one.
func Rename(field string, err error) error {
	return &Error{Field: field, Problem: err.(*Error).Problem}
}

// The checks below return nil or an *Error naming field.

// PositiveInt checks v > 0.
func PositiveInt(field string, v int) error {
	if v <= 0 {
		return Errorf(field, "must be greater than 0, got %s", strconv.Itoa(v))
	}
	return nil
}

// NonNegativeInt checks v >= 0.
func NonNegativeInt(field string, v int) error {
	if v < 0 {
		return Errorf(field, "must not be negative, got %s", strconv.Itoa(v))
	}
	return nil
}

// MaxDuration bounds durations so that adding one to time.Now never
// overflows: about 292 years is the int64 limit; we allow 100 years.
const MaxDuration = 100 * 365 * 24 * time.Hour

// PositiveDuration checks 0 < d <= MaxDuration.
func PositiveDuration(field string, d time.Duration) error {
	if d <= 0 {
		return Errorf(field, "must be greater than 0, got %v", d)
	}
	if d > MaxDuration {
		return Errorf(field, "is too large (%v); the maximum is %v", d, MaxDuration)
	}
	return nil
}

// NonNegativeDuration checks 0 <= d <= MaxDuration.
func NonNegativeDuration(field string, d time.Duration) error {
	if d < 0 {
		return Errorf(field, "must not be negative, got %v", d)
	}
	if d > MaxDuration {
		return Errorf(field, "is too large (%v); the maximum is %v", d, MaxDuration)
	}
	return nil
}

// ParseEnum is the one parsing rule of every Parse function: case and
// surrounding space are ignored, '_' stands for '-', and "" is def.
func ParseEnum[E ~string](s string, def E, values ...E) (E, bool) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	if n == "" {
		return def, true
	}
	for _, v := range values {
		if string(v) == n {
			return v, true
		}
	}
	return "", false
}

// UnknownEnum is the *Error of a Parse function: it quotes the input and
// lists the accepted names.
func UnknownEnum[E ~string](field, what, s string, values ...E) error {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = strconv.Quote(string(v))
	}
	return Errorf(field, "unknown %s %q; want one of %s", what, s, strings.Join(names, ", "))
}

// PipelineHasTimeout reports whether pipeline, a *resilience.Pipeline,
// holds a Timeout strategy. Package resilience sets it when it is
// initialised; core/outbound asks it to refuse a pipeline whose timeout
// would end the response bodies it returns, without either package
// exporting a way to list a pipeline's strategies.
var PipelineHasTimeout func(pipeline any) bool
