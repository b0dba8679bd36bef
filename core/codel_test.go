package resilience

import "testing"

func TestCoDelOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		o     CoDelOptions
		field string
	}{
		{CoDelOptions{Interval: -1}, "ConcurrencyLimiterOptions.CoDel.Interval"},
		{CoDelOptions{Target: -1}, "ConcurrencyLimiterOptions.CoDel.Target"},
	} {
		_, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, CoDel: &c.o})
		wantConfigField(t, err, c.field)
	}
	if _, err := NewConcurrencyLimiter(ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, CoDel: &CoDelOptions{}}); err != nil {
		t.Fatal(err)
	}
}
