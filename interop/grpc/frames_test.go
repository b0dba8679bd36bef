package grpcinterop

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// frame is one frame the server sent on the call's stream.
type frame struct {
	kind      http2.FrameType
	endStream bool
	fields    map[string]string // a HEADERS frame's fields
}

func (f frame) String() string {
	if f.kind != http2.FrameHeaders {
		return fmt.Sprintf("%v(end_stream=%v)", f.kind, f.endStream)
	}
	return fmt.Sprintf("HEADERS(end_stream=%v) %v", f.endStream, f.fields)
}

// rawCall sends one gRPC call of method (an empty message, the request
// stream ended with it) with the extra header fields over a fresh HTTP/2
// connection, and returns the frames the server sent on its stream until
// the stream ended. It speaks HTTP/2 with x/net's Framer directly, so what
// it returns is what is on the wire, before any client library reads it.
func rawCall(t *testing.T, addr string, extra ...string) []frame {
	t.Helper()
	frames, err := rawCallErr(addr, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// rawCallErr is rawCall for a goroutine other than the test's.
func rawCallErr(addr string, extra ...string) ([]frame, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		return nil, err
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := append([]string{":method", "POST", ":scheme", "http", ":path", method, ":authority", addr,
		"content-type", "application/grpc", "te", "trailers"}, extra...)
	for i := 0; i < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		return nil, err
	}
	// One enveloped message: not compressed, zero bytes long (an Empty).
	if err := fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}); err != nil {
		return nil, err
	}
	var got []frame
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return got, fmt.Errorf("reading frames after %v: %w", got, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			// A graceful GOAWAY that covers stream 1 (a draining connect
			// server sends one with its shutting-down answer) still
			// finishes the stream; anything else ends it.
			if f.ErrCode != http2.ErrCodeNo || f.LastStreamID < 1 {
				return got, fmt.Errorf("GOAWAY (%v, last stream %d) after %v", f.ErrCode, f.LastStreamID, got)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			fields := make(map[string]string, len(f.Fields))
			for _, hf := range f.Fields {
				fields[hf.Name] = hf.Value
			}
			got = append(got, frame{kind: http2.FrameHeaders, endStream: f.StreamEnded(), fields: fields})
			if f.StreamEnded() {
				return got, nil
			}
		case *http2.DataFrame:
			if f.StreamID != 1 {
				continue
			}
			got = append(got, frame{kind: http2.FrameData, endStream: f.StreamEnded()})
			if f.StreamEnded() {
				return got, nil
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return got, fmt.Errorf("stream reset (%v) after %v", f.ErrCode, got)
			}
		}
	}
}

// wait stands for any positive grpc-retry-pushback-ms in checkTrailersOnly.
const wait = "wait"

// checkTrailersOnly asserts that the call was answered with one HEADERS
// frame that ends the stream (a trailers-only response) carrying the
// status, the ErrorInfo ("REASON/reason") and the pushback.
func checkTrailersOnly(t *testing.T, frames []frame, code, info, pushback string) map[string]string {
	t.Helper()
	t.Logf("frames: %v", frames)
	if len(frames) != 1 || frames[0].kind != http2.FrameHeaders || !frames[0].endStream {
		t.Fatalf("%d frames %v, want one HEADERS frame with END_STREAM (trailers-only)", len(frames), frames)
	}
	f := frames[0].fields
	if f[":status"] != "200" || !strings.HasPrefix(f["content-type"], "application/grpc") {
		t.Errorf(":status %q content-type %q, want 200 application/grpc", f[":status"], f["content-type"])
	}
	if f["grpc-status"] != code || f["grpc-message"] == "" || f["grpc-status-details-bin"] == "" {
		t.Errorf("grpc-status %q message %q details %q, want %s with a message and details", f["grpc-status"], f["grpc-message"], f["grpc-status-details-bin"], code)
	}
	if got := f["grpc-retry-pushback-ms"]; pushback == wait {
		if ms, err := strconv.Atoi(got); err != nil || ms <= 0 {
			t.Errorf("grpc-retry-pushback-ms %q, want a wait", got)
		}
	} else if got != pushback {
		t.Errorf("grpc-retry-pushback-ms %q, want %q", got, pushback)
	}
	if _, ok := f["trailer"]; ok {
		t.Errorf("a trailer field declared in a trailers-only response: %q", f["trailer"])
	}
	if got := errorInfo(t, f); got != info {
		t.Errorf("ErrorInfo %s, want %s", got, info)
	}
	return f
}

// Every rejection made before the handler runs is a trailers-only
// response, the only kind a gRPC client may retry.
func TestRejectionsAreTrailersOnly(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		t.Run("full", func(t *testing.T) {
			g := newGate()
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, g.handle)
			cc, _ := dial(t, srv.addr, "")
			defer hold(t, cc, g)()
			f := checkTrailersOnly(t, rawCall(t, srv.addr), "14", "BULKHEAD_FULL/full", "1000")
			if tg.httpFields && f["retry-after"] != "1" {
				t.Errorf("retry-after %q, want 1", f["retry-after"])
			}
		})
		t.Run("full-on-rate-limited-route", func(t *testing.T) {
			// The call's rate-limit decision was made before the limiter
			// refused it: its RateLimit fields come in the one frame too.
			g := newGate()
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1},
				RateLimit: &resilience.RateLimiterOptions{PermitLimit: 5, Window: time.Hour}}, g.handle)
			cc, _ := dial(t, srv.addr, "")
			defer hold(t, cc, g)()
			f := checkTrailersOnly(t, rawCall(t, srv.addr), "14", "BULKHEAD_FULL/full", "1000")
			if tg.httpFields && (f["retry-after"] != "1" || f["ratelimit-limit"] != "5" || f["ratelimit-remaining"] != "3") {
				t.Errorf("retry-after %q ratelimit-limit %q ratelimit-remaining %q, want 1, 5, 3", f["retry-after"], f["ratelimit-limit"], f["ratelimit-remaining"])
			}
		})
		t.Run("queue-timeout", func(t *testing.T) {
			g := newGate()
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 20 * time.Millisecond}}, g.handle)
			cc, _ := dial(t, srv.addr, "")
			defer hold(t, cc, g)()
			checkTrailersOnly(t, rawCall(t, srv.addr), "14", "BULKHEAD_FULL/queue-timeout", "1000")
		})
		t.Run("dropped", func(t *testing.T) {
			g := newGate()
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{
				PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Minute, Overflow: resilience.OverflowDropOldest}}, g.handle)
			cc, _ := dial(t, srv.addr, "")
			release := hold(t, cc, g)
			type result struct {
				frames []frame
				err    error
			}
			oldest := make(chan result, 1)
			go func() {
				f, err := rawCallErr(srv.addr)
				oldest <- result{f, err}
			}()
			waitFor(t, "the first call queued", func() bool { return srv.queued() == 1 })
			newest := make(chan error, 1)
			go func() { newest <- invoke(context.Background(), cc) }() // evicts the oldest, then runs
			res := <-oldest
			if res.err != nil {
				t.Fatal(res.err)
			}
			checkTrailersOnly(t, res.frames, "14", "BULKHEAD_FULL/dropped", "1000")
			release() // the held call and then the newest one run
			if err := <-newest; err != nil {
				t.Errorf("newest call: %v", err)
			}
		})
		t.Run("caller-deadline-while-queued", func(t *testing.T) {
			g := newGate()
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Minute}}, g.handle)
			cc, _ := dial(t, srv.addr, "")
			defer hold(t, cc, g)()
			if tg.callerDeadline != "" {
				// Pinned: the transport resets the stream at the deadline,
				// unless the adapter's answer got out first.
				frames, err := rawCallErr(srv.addr, "grpc-timeout", "20m")
				if err == nil {
					checkTrailersOnly(t, frames, "4", "TIMEOUT/", "-1")
				} else if !strings.Contains(err.Error(), "CANCEL") || len(frames) != 0 {
					t.Errorf("%s: frames %v, error %v, want the stream reset (CANCEL) with nothing sent, or the adapter's TIMEOUT", tg.callerDeadline, frames, err)
				}
				return
			}
			checkTrailersOnly(t, rawCall(t, srv.addr, "grpc-timeout", "20m"), "4", "TIMEOUT/", "-1")
		})
		t.Run("deadline-expired-on-arrival", func(t *testing.T) {
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, func(context.Context) error { return nil })
			if tg.callerDeadline != "" {
				// Pinned: the transport answers DEADLINE_EXCEEDED itself,
				// before the adapter sees the call.
				frames := rawCall(t, srv.addr, "grpc-timeout", "0m")
				if len(frames) != 1 || frames[0].fields["grpc-status"] != "4" {
					t.Errorf("%s: frames %v, want one trailers-only DEADLINE_EXCEEDED", tg.callerDeadline, frames)
				}
				return
			}
			checkTrailersOnly(t, rawCall(t, srv.addr, "grpc-timeout", "0m"), "4", "TIMEOUT/", "-1")
		})
		t.Run("rate-limited", func(t *testing.T) {
			srv := tg.serve(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}}, func(context.Context) error { return nil })
			cc, _ := dial(t, srv.addr, "")
			if err := invoke(context.Background(), cc); err != nil {
				t.Fatal(err)
			}
			f := checkTrailersOnly(t, rawCall(t, srv.addr), "8", "RATE_LIMITED/", wait)
			if tg.httpFields && (f["retry-after"] == "" || f["ratelimit-limit"] != "1") {
				t.Errorf("retry-after %q ratelimit-limit %q, want the limiter's fields", f["retry-after"], f["ratelimit-limit"])
			}
		})
		t.Run("shutting-down", func(t *testing.T) {
			srv := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, func(context.Context) error { return nil })
			srv.drain()
			checkTrailersOnly(t, rawCall(t, srv.addr), "14", "BULKHEAD_FULL/shutting-down", "-1")
		})
	})
}

// A handler still running at its deadline is answered DEADLINE_EXCEEDED
// on time. The call was admitted, so this is no rejection: the framing is
// the adapter's own (target.deadlineFrames), and it must end the stream
// with the status in HEADERS and send no message.
func TestDeadlineOfRunningCallFraming(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		g := newGate()
		defer close(g.release)
		srv := tg.serve(t, inbound.Options{Timeout: 50 * time.Millisecond}, g.handle)
		frames := rawCall(t, srv.addr)
		t.Logf("frames: %v", frames)
		if len(frames) != tg.deadlineFrames {
			t.Fatalf("%d frames %v, want %d HEADERS frames", len(frames), frames, tg.deadlineFrames)
		}
		for i, f := range frames {
			if f.kind != http2.FrameHeaders || f.endStream != (i == len(frames)-1) {
				t.Fatalf("frame %d is %v: want HEADERS frames only, the last one ending the stream", i, f)
			}
		}
		if last := frames[len(frames)-1].fields; last["grpc-status"] != "4" || last["grpc-status-details-bin"] == "" {
			t.Errorf("last frame %v, want grpc-status 4 with details", last)
		}
		if _, ok := frames[len(frames)-1].fields["grpc-retry-pushback-ms"]; ok {
			t.Errorf("a pushback on the deadline of an admitted call")
		}
	})
}

// A unary call past Options.Timeout whose handler sent nothing is answered
// trailers-only, as the adapters' documentation says: one HEADERS frame
// ending the stream with grpc-status 4, the TIMEOUT ErrorInfo and no
// pushback (the call was admitted), read off the wire.
func TestDeadlineOfUntouchedCallIsTrailersOnly(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		g := newGate()
		defer close(g.release)
		srv := tg.serve(t, inbound.Options{Timeout: 50 * time.Millisecond}, g.handle)
		checkTrailersOnly(t, rawCall(t, srv.addr), "4", "TIMEOUT/", "")
	})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// errorInfo decodes the ErrorInfo detail of a grpc-status-details-bin
// field and returns "REASON/metadata reason".
func errorInfo(t *testing.T, fields map[string]string) string {
	t.Helper()
	v := fields["grpc-status-details-bin"]
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
	if err != nil {
		t.Fatalf("grpc-status-details-bin %q: %v", v, err)
	}
	var st spb.Status
	if err := proto.Unmarshal(b, &st); err != nil {
		t.Fatalf("grpc-status-details-bin: %v", err)
	}
	for _, d := range st.GetDetails() {
		var info errdetails.ErrorInfo
		if d.MessageIs(&info) {
			if err := d.UnmarshalTo(&info); err != nil {
				t.Fatal(err)
			}
			return info.GetReason() + "/" + info.GetMetadata()["reason"]
		}
	}
	t.Fatalf("no ErrorInfo in %v", st.GetDetails())
	return ""
}
