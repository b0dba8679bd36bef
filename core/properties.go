package resilience

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
func (k *keyID) String() string { return "resilience.Key(" + k.name + ")" }
