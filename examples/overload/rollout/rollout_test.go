package rollout

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The rollout runs on loopback through its three phases: in shadow no
// request is shed and the would-be refusals are counted, enforcing sheds,
// and the report sets the two side by side. A short, small run: the
// figure itself is measured with the full run (BENCHMARKS.md); here only
// its sign of life and a loose bound, since the machine may be loaded.
func TestRolloutShadowPredictsEnforcedShedding(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Rate: 200, Phase: 2 * time.Second, Limit: 10, ServiceTime: 100 * time.Millisecond,
		Window: 500 * time.Millisecond, Shares: []int{100, 50, 0}}
	rep, err := Measure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var shedInShadow, wouldShed, shedEnforced int
	for _, w := range rep.Windows {
		switch w.Share {
		case 100:
			shedInShadow += w.Shed
			wouldShed += w.WouldShed
		case 0:
			shedEnforced += w.Shed
		}
	}
	if shedInShadow != 0 || wouldShed == 0 || shedEnforced == 0 {
		t.Fatalf("shed %d in shadow (want 0), would-shed %d, shed %d enforced (want both > 0)", shedInShadow, wouldShed, shedEnforced)
	}
	if rep.ErrorPct < -50 || rep.ErrorPct > 50 {
		t.Errorf("prediction off by %+.0f %% (predicted %.0f/s, shed %.0f/s)", rep.ErrorPct, rep.PredictedPerSec, rep.ShedPerSec)
	}
}
