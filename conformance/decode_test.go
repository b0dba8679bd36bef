package conformance_test

import (
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"net/http"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"

	"github.com/ylcnfrht/resilience/conformance"
)

func init() {
	// A decoder that refuses every body: the rejection cases must fail
	// with its error, proof that the harness's decoder is what reads them.
	selfTestHarnesses["refusing-decoder"] = func() conformance.Harness {
		h := netHTTPHarness()
		h.DecodeRejection = func(int, http.Header, []byte) (conformance.Rejection, error) {
			return conformance.Rejection{}, errors.New("decoder refused on purpose")
		}
		return h
	}
}

// A harness's DecodeRejection reads the rejection bodies instead of the
// default JSON check.
func TestRunUsesHarnessDecoder(t *testing.T) {
	passed, out := runChild(t, "refusing-decoder", "queue-full-rejects-at-once")
	if passed {
		t.Fatalf("a case passed though the harness's decoder refused every rejection:\n%s", out)
	}
	expectOutput(t, out, "decoder refused on purpose")
}

// DecodeJSONRejection reads inbound's own bodies, and refuses one whose
// status, content type or fields disagree.
func TestDecodeJSONRejection(t *testing.T) {
	m, err := adapt.New(adapt.Framework{}, inbound.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err          error
		code, reason string
	}{
		{&resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonQueueTimeout}, inbound.CodeBulkheadFull, "queue-timeout"},
		{&resilience.TimeoutRejectedError{}, inbound.CodeTimeout, ""},
		{&resilience.RateLimitRejectedError{}, inbound.CodeRateLimited, ""},
	} {
		resp, _ := m.Render(tc.err)
		got, err := conformance.DecodeJSONRejection(resp.Status, resp.Header, resp.Body)
		if err != nil || got.Code != tc.code || got.Reason != tc.reason || got.Message == "" {
			t.Errorf("%v: decoded %+v, %v; want code %s, reason %q", tc.err, got, err, tc.code, tc.reason)
		}
		if _, err := conformance.DecodeJSONRejection(resp.Status+1, resp.Header, resp.Body); err == nil {
			t.Errorf("%v: a body under another status was accepted", tc.err)
		}
		if _, err := conformance.DecodeJSONRejection(resp.Status, http.Header{"Content-Type": {"text/plain"}}, resp.Body); err == nil {
			t.Errorf("%v: a body of another content type was accepted", tc.err)
		}
	}
}
