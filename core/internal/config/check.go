package config

import (
	"strconv"
	"time"
)

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
