package property

import (
	"context"
	"testing"
)

// Invariant: keys are isolated by identity, not by name or type.
func TestKeysAreDistinctByIdentity(t *testing.T) {
	a := NewKey[string]("tenant")
	b := NewKey[string]("tenant")
	ctx := a.With(context.Background(), "acme")
	if v, ok := a.Value(ctx); !ok || v != "acme" {
		t.Fatalf("a.Value = %q, %v", v, ok)
	}
	if _, ok := b.Value(ctx); ok {
		t.Fatal("a key with the same name read another key's value")
	}
	if a.Name() != "tenant" {
		t.Fatalf("Name = %q", a.Name())
	}
}

func TestZeroKeyIsInert(t *testing.T) {
	var k Key[int]
	ctx := context.Background()
	if k.With(ctx, 1) != ctx {
		t.Fatal("zero key changed the context")
	}
	if _, ok := k.Value(ctx); ok {
		t.Fatal("zero key found a value")
	}
	if k.Name() != "" {
		t.Fatal("zero key has a name")
	}
}
