// Package config holds the option checking shared by package resilience
// and the module's other packages (limit, ratelimit, budget, throttle,
// retryafter): the one error type they all return for an invalid option,
// which package resilience re-exports as ConfigError (this file), the
// range checks that build it (check.go) and the one parsing rule of every
// Parse function (enum.go).
package config

import (
	"errors"
	"fmt"
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
