package lab

import (
	"testing"
	"time"
)

func TestSplitStormMode(t *testing.T) {
	for _, tc := range []struct{ name, server, client string }{
		{"fixed-naive", "fixed", ClientNaive},
		{"fixed-retrylast-budget-throttle", "fixed-retrylast", ClientBudgetThrottle},
		{"none-budget", "none", ClientBudget},
		{"fixed-throttle", "fixed", ClientThrottle},
	} {
		s, c, ok := splitStormMode(tc.name)
		if !ok || s != tc.server || c != tc.client {
			t.Errorf("%s: got %q %q %v", tc.name, s, c, ok)
		}
	}
	if _, _, ok := splitStormMode("fixed"); ok {
		t.Error("a mode without a client behaviour was accepted")
	}
	for _, m := range StormModes() {
		if _, _, ok := splitStormMode(m.Name); !ok {
			t.Errorf("StormModes has %q, which does not split", m.Name)
		}
	}
}

// The arrivals follow the scenario: the rate until the drop at half the
// run, half of it after.
func TestStormArrivals(t *testing.T) {
	cfg, _ := Preset(ScenarioRetryStorm)
	arr := stormArrivals(&cfg)
	var before, after int
	for _, a := range arr {
		if a < cfg.Duration/2 {
			before++
		} else {
			after++
		}
	}
	if before != 16000 || after != 8000 {
		t.Fatalf("%d arrivals before the drop and %d after, want 16000 and 8000", before, after)
	}
}

// Recovery is the start of the first bucket from which every bucket
// succeeds enough, or -1 when the last one does not.
func TestStormRecovery(t *testing.T) {
	drop, end := 10*time.Second, 12*time.Second
	var arr []time.Duration
	var ok []bool
	for at := drop; at < end; at += 10 * time.Millisecond {
		arr = append(arr, at)
		ok = append(ok, at >= drop+600*time.Millisecond) // fails for 0.6 s
	}
	if got := recovery(arr, ok, drop, end); got != 0.75 {
		t.Fatalf("recovery %v, want 0.75 (the bucket after the failures)", got)
	}
	ok[len(ok)-1], ok[len(ok)-2], ok[len(ok)-3] = false, false, false
	if got := recovery(arr, ok, drop, end); got != -1 {
		t.Fatalf("recovery %v with a failing last bucket, want -1", got)
	}
}

// The figures count attempts per logical request by the phase it started
// in, and success shares of first attempts and retries separately.
func TestSummariseStorm(t *testing.T) {
	cfg, _ := Preset(ScenarioRetryStorm)
	cfg.Duration = 2 * time.Second
	arr := []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond}
	recs := make([]stormAttempt, len(arr)*(stormRetries+1))
	recs[0] = stormAttempt{end: 100 * time.Millisecond, kind: kindShed}
	recs[1] = stormAttempt{end: 300 * time.Millisecond, kind: kindOK}
	recs[4] = stormAttempt{end: 700 * time.Millisecond, kind: kindOK}
	recs[8] = stormAttempt{end: 1700 * time.Millisecond, kind: kindOK}
	r := summariseStorm(&cfg, "m", ClientNaive, arr, recs, []bool{true, true, true}, make([]time.Duration, 3))
	f := r.StormFigures
	if f.Amplification != 1.5 || f.AmplificationAfter != 1 || f.FirstAttemptShare != 0.5 || f.RetryShare != 1 ||
		f.LogicalShare != 1 || f.RecoverySeconds != 0 || f.GoodputOverload != 2 || f.GoodputAfter != 1 || r.Sent != 4 || r.Retries != 1 {
		t.Fatalf("figures %+v, result sent %d retries %d", f, r.Sent, r.Retries)
	}
}
