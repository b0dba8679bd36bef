// Package property carries per-execution properties in a
// context.Context: typed keys of your own (Key, made by NewKey), and
// WithSingleAttempt, the mark the retry and hedging strategies of package
// resilience read to make one attempt only.
package property

import "context"

// Key is a typed key for a per-execution property carried in a
// context.Context. Two keys made by separate NewKey calls never collide, even
// with the same name and type. Keys are comparable and safe to share. The
// zero Key stores nothing: Value always reports false and With returns ctx
// unchanged.
type Key[T any] struct {
	id *keyID
}

type keyID struct{ name string }

// NewKey returns a new property key. The name is only for diagnostics.
func NewKey[T any](name string) Key[T] {
	return Key[T]{id: &keyID{name: name}}
}

// Name returns the name the key was made with.
func (k Key[T]) Name() string {
	if k.id == nil {
		return ""
	}
	return k.id.name
}

// With returns a copy of ctx that carries v under k.
func (k Key[T]) With(ctx context.Context, v T) context.Context {
	if k.id == nil {
		return ctx
	}
	return context.WithValue(ctx, k.id, v)
}

// Value returns the value stored under k in ctx, and whether there was one.
func (k Key[T]) Value(ctx context.Context) (T, bool) {
	var zero T
	if k.id == nil || ctx == nil {
		return zero, false
	}
	v, ok := ctx.Value(k.id).(T)
	if !ok {
		return zero, false
	}
	return v, true
}

// String returns the key's name, for diagnostics.
func (k *keyID) String() string { return "property.Key(" + k.name + ")" }

type singleAttemptKey struct{}

// WithSingleAttempt returns a copy of ctx under which the retry and
// hedging strategies make exactly one attempt, for operations that must
// not be repeated (a non-idempotent request, one whose body cannot be
// replayed). Other strategies are unaffected.
func WithSingleAttempt(ctx context.Context) context.Context {
	return context.WithValue(ctx, singleAttemptKey{}, true)
}

// SingleAttempt reports whether ctx was marked by WithSingleAttempt.
func SingleAttempt(ctx context.Context) bool {
	v, _ := ctx.Value(singleAttemptKey{}).(bool)
	return v
}
