package deadline

import (
	"testing"
	"testing/synctest"
	"time"
)

// Now reads the real clock with a monotonic reading, never behind
// time.Now's, so that deadlines computed from it compare with those
// computed from time.Now.
func TestNowFollowsTheMonotonicClock(t *testing.T) {
	before := time.Now()
	now := Now()
	after := time.Now()
	if FakeClock(now) {
		t.Fatal("Now carries no monotonic reading outside a bubble")
	}
	if now.Before(before) || now.After(after) {
		t.Fatalf("Now = %v, not between %v and %v", now, before, after)
	}
	if d := now.Sub(before); d < 0 {
		t.Fatalf("Now is %v before an earlier time.Now", -d)
	}
}

// Inside a synctest bubble Now is the bubble's clock, without a monotonic
// reading, so that the deadline list gives the entry a timer of the
// bubble's (FakeClock).
func TestNowInsideABubbleIsTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := Now()
		if !FakeClock(now) {
			t.Fatalf("Now = %v inside a bubble carries a monotonic reading", now)
		}
		if want := time.Now(); !now.Equal(want) {
			t.Fatalf("Now = %v inside a bubble, want the bubble's %v", now, want)
		}
		time.Sleep(time.Second)
		if got := Now().Sub(now); got != time.Second {
			t.Fatalf("a second later in the bubble Now moved %v", got)
		}
	})
}

func BenchmarkNow(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sinkTime = time.Now()
		}
	})
	b.Run("Now", func(b *testing.B) {
		for b.Loop() {
			sinkTime = Now()
		}
	})
}

var sinkTime time.Time
