package lab

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// Each tenant sends its own rate, the merged stream is in time order, and
// a Rate changed after the preset scales every tenant alike.
func TestTenantArrivals(t *testing.T) {
	cfg, _ := Preset("fair")
	cfg.Duration = 2 * time.Second
	for _, scale := range []float64{1, 0.5} {
		cfg.Rate = scale * tenantRate(cfg.Tenants)
		for _, arr := range []string{ArrivalsEven, ArrivalsPoisson} {
			cfg.Arrivals = arr
			at, cls := tenantArrivals(&cfg)
			count := make([]int, len(cfg.Tenants))
			for i := range at {
				if i > 0 && at[i] < at[i-1] {
					t.Fatalf("%s: arrival %d at %v before %v", arr, i, at[i], at[i-1])
				}
				count[cls[i]]++
			}
			for i, tn := range cfg.Tenants {
				want := tn.Rate * scale * cfg.Duration.Seconds()
				tol := 1.0
				if arr == ArrivalsPoisson {
					tol = 5 * math.Sqrt(want) // 5 standard deviations
				}
				if math.Abs(float64(count[i])-want) > tol {
					t.Errorf("%s, scale %v: tenant %s sent %d, want %v", arr, scale, tn.Name, count[i], want)
				}
			}
		}
	}
}

// The per-tenant results count first attempts as sent and answered ones
// as in time, and the table names every tenant and the worst quiet one.
func TestTenantResultsAndTable(t *testing.T) {
	cfg, _ := Preset("fair")
	cfg.Tenants = []Tenant{{Name: "noisy", Rate: 10}, {Name: "quiet-1", Rate: 1}, {Name: "quiet-2", Rate: 1}}
	cfg.Rate = 12
	recs := []record{
		{kind: kindOK, class: 0}, {kind: kindShed, class: 0}, // attempt and its retry
		{kind: kindShed, class: 0}, {},
		{kind: kindOK, class: 1}, {},
		{kind: kindTimeout, class: 2}, {},
		{kind: kindOK, class: 2}, {},
	}
	got := tenantResults(&cfg, recs)
	want := []ClassResult{{"noisy", 2, 1, 0.5, 0}, {"quiet-1", 1, 1, 1, 0}, {"quiet-2", 2, 1, 0.5, 0}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("tenant %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	rep := &Report{Config: cfg, Results: []Result{{Contender: "fixed-fair", Classes: got}}}
	var b bytes.Buffer
	if err := rep.writeTenantTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"noisy [10]", "quiet-2 [1]", "worst quiet", "fixed-fair", "50.0 %", "100.0 %"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	if w := worstQuiet(got); w != 0.5 {
		t.Errorf("worst quiet %v, want 0.5", w)
	}
}

func TestValidateTenants(t *testing.T) {
	for _, ts := range [][]Tenant{{{Name: "", Rate: 1}}, {{Name: "a", Rate: 1}, {Name: "a", Rate: 2}}, {{Name: "a", Rate: 0}}} {
		if err := validateTenants(ts); err == nil {
			t.Errorf("%v: no error", ts)
		}
	}
	cfg, _ := Preset("fair")
	cfg.High = 0.3
	if err := cfg.Validate(); err == nil {
		t.Error("tenants with priority classes: no error")
	}
}

// Closed-loop workers: a tenant's own, or Workers split by the tenants'
// rates with at least one each, or the priority classes by High.
func TestClosedWorkers(t *testing.T) {
	cfg, _ := Preset(ScenarioFairClosed)
	if !cfg.ClosedLoop() || cfg.workerCount() != 69 || cfg.tenantWorkers(0) != 60 || cfg.tenantWorkers(9) != 1 {
		t.Fatalf("fair-closed: closed %v, %d workers, noisy %d, quiet-9 %d", cfg.ClosedLoop(), cfg.workerCount(), cfg.tenantWorkers(0), cfg.tenantWorkers(9))
	}
	cfg, _ = Preset("fair")
	if cfg.ClosedLoop() {
		t.Fatal("fair: closed loop without workers")
	}
	cfg.Workers = 100
	if n, q := cfg.tenantWorkers(0), cfg.tenantWorkers(1); n != 60 || q != 4 {
		t.Errorf("fair with 100 workers: noisy %d, quiet %d; want 60 and 4", n, q)
	}
	cfg, _ = Preset("priority")
	cfg.Workers = 10
	high := 0
	for _, w := range closedWorkers(&cfg) {
		high += int(w.class)
	}
	if high != 3 || cfg.workerCount() != 10 {
		t.Errorf("priority with 10 workers: %d high of %d, want 3 of 10", high, cfg.workerCount())
	}
	cfg.Resend = "later"
	if err := cfg.Validate(); err == nil {
		t.Error("resend later: no error")
	}
	cfg, _ = Preset(ScenarioRetryStorm)
	cfg.Workers = 10
	if err := cfg.Validate(); err == nil {
		t.Error("retry-storm closed loop: no error")
	}
}
