package resiliencegrpc_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// readmeRecipe returns the service-config recipe of README.md (the first
// json block of its "Client side" section) for the test service.
func readmeRecipe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Client side\n")
	if !ok {
		t.Fatal(`README.md has no "Client side" section`)
	}
	_, block, ok := strings.Cut(section, "\n```json\n")
	if !ok {
		t.Fatal(`README.md's "Client side" has no json block`)
	}
	recipe, _, ok := strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("README.md's json block does not end")
	}
	if !strings.Contains(recipe, `"pkg.Service"`) {
		t.Fatal(`the recipe no longer names "pkg.Service"`)
	}
	return strings.Replace(recipe, `"pkg.Service"`, `"grpc.testing.TestService"`, 1)
}

// TestServiceConfigRecipe: the README's recipe is a service config
// grpc-go accepts (grpc.NewClient refuses an invalid default one), and on
// a server that refuses every call it does what the README says: the
// retry policy makes maxAttempts (3) attempts, and retryThrottling
// (maxTokens 10: retries stop at 5 tokens or fewer, each failure takes 1)
// first shortens the retries and then stops them, while every call's
// first attempt is still sent.
func TestServiceConfigRecipe(t *testing.T) {
	recipe := readmeRecipe(t)
	if _, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(strings.Replace(recipe, `"maxTokens": 10`, `"maxTokens": 0`, 1))); err == nil {
		t.Fatal("grpc-go accepted a recipe with maxTokens 0: the parser is not checking what this test relies on")
	}
	var arr arrivals
	s, _ := refusing(t, inbound.Options{RetryAfter: time.Millisecond}, &arr, grpc.WithDefaultServiceConfig(recipe))
	var attempts []int
	for i := range 60 {
		before := len(arr.times())
		r := receive(t, "call", s.callUnary(marked()))
		// grpc-go v1.85 returns the last attempt's error, and that is at
		// times the io.EOF of writing the request, whose code is Unknown
		// (README, "Client side").
		if c := status.Code(r.err); c != codes.Unavailable && (c != codes.Unknown || !strings.HasSuffix(r.err.Error(), "EOF")) {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i, r.err)
		}
		attempts = append(attempts, len(arr.times())-before)
	}
	// Tokens: 10 → 9, 8, 7 (call 1: three attempts); 6, 5 (call 2: the
	// second failure leaves 5, so no third attempt); 4 (call 3: one).
	if attempts[0] != 3 || attempts[1] != 2 || attempts[2] != 1 {
		t.Errorf("attempts per call %v, want [3 2 1 …]", attempts)
	}
	// The tokens never come back without a success: one attempt per call
	// from then on, for retryThrottling never refuses a first attempt.
	total := 0
	for i, n := range attempts {
		total += n
		if i >= 2 && n != 1 {
			t.Errorf("call %d made %d attempts, want 1", i, n)
		}
	}
	t.Logf("%d calls against a server refusing all: %d attempts sent", len(attempts), total)
}
