package adapt_test

import (
	"context"
	"errors"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// Execute (the adapters of frameworks not built on net/http) returns the
// panic as a *PanicError, its value reachable with errors.Is, after the
// permit is back; Render gives the 500 INTERNAL.
func TestAnswerPanicsExecuteReturnsPanicError(t *testing.T) {
	m, err := adapt.New(adapt.Framework{}, inbound.Options{
		Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second},
		AnswerPanics: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	log.SetOutput(io.Discard)
	defer log.SetOutput(os.Stderr)
	bug := errors.New("bug")
	err = m.Execute(context.Background(), nil, func(context.Context) error { panic(bug) })
	var pe *inbound.PanicError
	if !errors.As(err, &pe) || !errors.Is(err, bug) || len(pe.Stack) == 0 || strings.Contains(err.Error(), "bug") {
		t.Fatalf("Execute: %v, want a *PanicError wrapping the value, with a stack, whose text does not name it", err)
	}
	if st := m.Stats(); st.InFlight != 0 {
		t.Errorf("%d in flight after the panic, want 0", st.InFlight)
	}
	if resp, ok := m.Render(err); !ok || resp.Status != 500 || !strings.Contains(string(resp.Body), `"INTERNAL"`) {
		t.Errorf("Render: %d %q %v, want the 500 INTERNAL", resp.Status, resp.Body, ok)
	}
}
