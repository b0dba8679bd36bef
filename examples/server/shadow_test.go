package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// -shadow learns a limit on live traffic without turning anyone away:
// 40 concurrent requests over a limit of 5 with no queue all get 200,
// and /debug/limits counts those the limit would have refused. The same
// load without -shadow gets 503s: the contrast the flag exists for.
func TestShadowFlagCountsWithoutShedding(t *testing.T) {
	for _, shadow := range []bool{true, false} {
		name := "enforcing"
		args := []string{"-permit-limit", "5", "-queue-limit", "0"}
		if shadow {
			name = "shadow"
			args = append(args, "-shadow")
		}
		t.Run(name, func(t *testing.T) {
			s := startServer(t, args...)
			const n = 40
			results := make([]<-chan result, n)
			for i := range n {
				results[i] = s.async(context.Background(), "/work?ms=1000") // long enough for all 40 to overlap on a loaded machine
			}
			codes := map[int]int{}
			for _, ch := range results {
				r := <-ch
				if r.err != nil {
					t.Fatal(r.err)
				}
				codes[r.status]++
			}
			var limits struct {
				Full   int `json:"full"`
				Shadow struct {
					Full int `json:"full"`
				} `json:"shadow"`
			}
			resp, err := s.client.Get(s.url + "/debug/limits")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&limits); err != nil {
				t.Fatal(err)
			}
			if shadow {
				if codes[http.StatusOK] != n {
					t.Errorf("statuses %v, want all %d 200: nothing is enforced in shadow", codes, n)
				}
				if limits.Shadow.Full < 25 || limits.Full != 0 {
					t.Errorf("/debug/limits full %d, shadow.full %d: want at least 25 would-be refusals, none sent", limits.Full, limits.Shadow.Full)
				}
			} else if codes[http.StatusServiceUnavailable] == 0 || limits.Full == 0 {
				t.Errorf("statuses %v, full %d: the same load enforced must get 503s", codes, limits.Full)
			}
			s.waitIdle(t)
		})
	}
}

// The start-up banner says when the limits it prints run in shadow, so
// a -shadow run is not mistaken for an enforcing one.
func TestBannerSaysShadow(t *testing.T) {
	_, banner := startGRPC(t, "-shadow")
	if !strings.Contains(banner, "; shadow 100%") {
		t.Errorf("banner of a -shadow run does not say so:\n%s", banner)
	}
	_, banner = startGRPC(t)
	if strings.Contains(banner, "shadow") {
		t.Errorf("banner of an enforcing run mentions shadow:\n%s", banner)
	}
}
