package main

import "testing"

// Invariant: -framework gin serves the same routes with the same behaviour
// as chi.
func TestFrameworkGin(t *testing.T) { runAsFramework(t, "gin") }
