package resilienceecho_test

import (
	"errors"
	"testing"

	"github.com/ylcnfrht/resilience/adapters/echo"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// TestInvalidOptions: bad configuration is an error naming the field, from
// both constructors, never a panic per request.
func TestInvalidOptions(t *testing.T) {
	bad := inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 0}}
	_, err1 := resilienceecho.New(bad)
	_, err2 := resilienceecho.NewMiddleware(bad)
	for _, err := range []error{err1, err2} {
		var ce *resilience.ConfigError
		if !errors.As(err, &ce) || ce.Field != "ConcurrencyLimiterOptions.PermitLimit" || !errors.Is(err, resilience.ErrInvalidOptions) {
			t.Errorf("err = %v, want a *resilience.ConfigError for ConcurrencyLimiterOptions.PermitLimit", err)
		}
	}
}
