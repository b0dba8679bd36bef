package resilienceconnect

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// FuzzCallerTimeout: the deadline headers parse to a non-negative
// duration, to "no timeout", or to an InvalidArgument connect error, never
// anything else; well-formed values parse to what they say.
func FuzzCallerTimeout(f *testing.F) {
	for _, s := range []string{"", "0", "100", "9999999999", "12345678901", "-1", "+5", "1.5", "0n", "5m", "99999999H", "100000000m", "1x", "m", "-1m", " 1S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, w := range []wire{wireConnectUnary, wireGRPC} {
			h := http.Header{}
			h.Set("Connect-Timeout-Ms", v)
			h.Set("Grpc-Timeout", v)
			d, err := callerTimeout(w, h)
			switch {
			case err == nil:
				if d < 0 {
					t.Fatalf("%q parsed to a negative %v", v, d)
				}
			case errors.Is(err, errNoTimeout):
			default:
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
					t.Fatalf("%q: error %v, want InvalidArgument", v, err)
				}
			}
		}
		// Well-formed values, built from v's bytes.
		digits := make([]byte, 0, 10)
		for i := 0; i < len(v) && len(digits) < 8; i++ {
			digits = append(digits, '0'+v[i]%10)
		}
		if len(digits) == 0 {
			return
		}
		n, _ := strconv.ParseInt(string(digits), 10, 64)
		if d, err := parseConnectTimeout(string(digits)); err != nil || d != time.Duration(n)*time.Millisecond {
			t.Fatalf("Connect-Timeout-Ms %s: %v, %v", digits, d, err)
		}
		units := map[byte]time.Duration{'n': time.Nanosecond, 'u': time.Microsecond, 'm': time.Millisecond, 'S': time.Second, 'M': time.Minute, 'H': time.Hour}
		for u, size := range units {
			if u == 'H' && n > math.MaxInt64/int64(time.Hour) {
				if _, err := parseGRPCTimeout(string(digits) + "H"); !errors.Is(err, errNoTimeout) {
					t.Fatalf("grpc-timeout %sH overflows a Duration: %v, want no timeout", digits, err)
				}
				continue
			}
			if d, err := parseGRPCTimeout(string(digits) + string(u)); err != nil || d != time.Duration(n)*size {
				t.Fatalf("grpc-timeout %s%c: %v, %v", digits, u, d, err)
			}
		}
	})
}

// TestEnvelopeTracking: the writer knows whether the body ends between two
// envelopes however the envelopes are split across writes.
func TestEnvelopeTracking(t *testing.T) {
	body := append(append(envelope(0, "hello"), envelope(1, "")...), envelope(0, "world!")...)
	ends := map[int]bool{0: true, 10: true, 15: true, len(body): true}
	for split := 0; split <= len(body); split++ {
		tw := &deadlineAnswer{}
		tw.track(body[:split])
		if got := tw.betweenEnvelopes(); got != ends[split] {
			t.Errorf("after %d bytes: between envelopes %v, want %v", split, got, ends[split])
		}
		tw.track(body[split:])
		if !tw.betweenEnvelopes() {
			t.Errorf("split at %d: whole body not between envelopes", split)
		}
	}
}
