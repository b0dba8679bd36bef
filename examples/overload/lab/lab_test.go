package lab

import (
	"math"
	"testing"
	"time"
)

// Even arrivals send exactly rate × duration requests, evenly spaced;
// Poisson arrivals are reproducible from the seed and near the rate.
func TestArrivalsCountAndSeed(t *testing.T) {
	cfg, _ := Preset("overload")
	cfg.Rate, cfg.Duration = 300, 2*time.Second
	even := arrivals(&cfg)
	if len(even) != 600 || even[0] != 0 || even[1] != time.Second/300 {
		t.Fatalf("even: %d arrivals starting %v, %v", len(even), even[0], even[1])
	}
	cfg.Arrivals, cfg.Duration = ArrivalsPoisson, 20*time.Second
	a, b := arrivals(&cfg), arrivals(&cfg)
	if len(a) != len(b) || a[len(a)/2] != b[len(b)/2] {
		t.Fatal("poisson arrivals differ for the same seed")
	}
	if n := float64(len(a)); math.Abs(n-6000) > 300 { // 4 standard deviations
		t.Fatalf("poisson: %v arrivals, want about 6000", n)
	}
	cfg.Seed = 2
	if c := arrivals(&cfg); len(c) == len(a) && c[len(c)/2] == a[len(a)/2] {
		t.Fatal("poisson arrivals ignore the seed")
	}
}

// The high class is exactly the configured share of the requests.
func TestClassesShare(t *testing.T) {
	cfg, _ := Preset("priority")
	cls := classes(&cfg, 1000)
	high := 0
	for _, c := range cls {
		high += int(c)
	}
	if high != 300 {
		t.Fatalf("%d high of 1000, want 300", high)
	}
}

func TestParseSteps(t *testing.T) {
	s, err := ParseSteps("10s:50, 20s:100")
	if err != nil || len(s) != 2 || s[0] != (Step{10 * time.Second, 50}) || s[1] != (Step{20 * time.Second, 100}) {
		t.Fatalf("got %v, %v", s, err)
	}
	for _, bad := range []string{"10s", "x:5", "10s:0", "20s:5,10s:6"} {
		if _, err := ParseSteps(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Shrinking the pool stops new grants until enough slots are released;
// growing it grants waiters at once, in arrival order.
func TestSlotPoolResize(t *testing.T) {
	p := newSlotPool(2)
	never := make(chan struct{})
	p.acquire(never)
	p.acquire(never)
	p.resize(1)
	got := make(chan int, 2)
	for i := range 2 {
		go func() {
			if p.acquire(never) {
				got <- i
			}
		}()
		// Wait until the goroutine is queued, so the order is known.
		for {
			p.mu.Lock()
			n := len(p.waiters)
			p.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	p.release() // busy 1 of size 1: nobody is granted
	select {
	case i := <-got:
		t.Fatalf("waiter %d granted above the shrunk size", i)
	default:
	}
	p.resize(2) // room for one: the first come
	if a := <-got; a != 0 {
		t.Fatalf("granted waiter %d first, want 0", a)
	}
	p.resize(3)
	if b := <-got; b != 1 {
		t.Fatalf("granted waiter %d second, want 1", b)
	}
}

// summarise counts each outcome once, computes goodput over the run and
// its last 10 s, and the per-class shares.
func TestSummarise(t *testing.T) {
	cfg, _ := Preset("priority")
	cfg.Duration = 20 * time.Second
	recs := []record{
		{end: 1 * time.Second, lat: 200 * time.Millisecond, kind: kindOK, class: 1},
		{}, // no retry
		{end: 15 * time.Second, lat: 400 * time.Millisecond, kind: kindOK, class: 0},
		{},
		{end: 16 * time.Second, lat: time.Millisecond, kind: kindShed, class: 0},
		{},
		{end: 17 * time.Second, lat: time.Second, kind: kindTimeout, class: 1},
		{end: 18 * time.Second, lat: 300 * time.Millisecond, kind: kindOK, class: 1}, // its retry
	}
	r := summarise(&cfg, 500, "x", recs, []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond})
	if r.Sent != 5 || r.Retries != 1 || r.OK != 3 || r.Shed != 1 || r.Timeouts != 1 {
		t.Fatalf("counts %+v", r)
	}
	if r.Goodput != 0.2 || r.GoodputLast10 != 0.2 { // 3 in 20 s; 2 in the last 10 s
		t.Fatalf("goodput %v, last 10 s %v", r.Goodput, r.GoodputLast10)
	}
	if r.P50 != 300 || r.P99 != 400 || r.ShedP99 != 1 {
		t.Fatalf("p50 %v p99 %v shed p99 %v", r.P50, r.P99, r.ShedP99)
	}
	// Classes count the original requests: the high one that timed out
	// and was answered on retry counts as answered.
	if len(r.Classes) != 2 || r.Classes[1].Sent != 2 || r.Classes[1].InTime != 2 || r.Classes[0].Share != 0.5 {
		t.Fatalf("classes %+v", r.Classes)
	}
}
