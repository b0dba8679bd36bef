package main

import "testing"

// Invariant: -framework echo serves the same routes with the same
// behaviour as chi.
func TestFrameworkEcho(t *testing.T) { runAsFramework(t, "echo") }
