package grpcinterop

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

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
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := append([]string{":method", "POST", ":scheme", "http", ":path", method, ":authority", addr,
		"content-type", "application/grpc", "te", "trailers"}, extra...)
	for i := 0; i < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// One enveloped message: not compressed, zero bytes long (an Empty).
	if err := fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	var got []frame
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames after %v: %v", got, err)
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
			t.Fatalf("GOAWAY after %v", got)
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
				return got
			}
		case *http2.DataFrame:
			if f.StreamID != 1 {
				continue
			}
			got = append(got, frame{kind: http2.FrameData, endStream: f.StreamEnded()})
			if f.StreamEnded() {
				return got
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				t.Fatalf("stream reset (%v) after %v", f.ErrCode, got)
			}
		}
	}
}

// wait stands for any positive grpc-retry-pushback-ms in checkTrailersOnly.
const wait = "wait"

// checkTrailersOnly asserts that the call was answered with one HEADERS
// frame that ends the stream (a trailers-only response) carrying the
// status and the fields a client needs to act on it.
func checkTrailersOnly(t *testing.T, frames []frame, code, pushback string) map[string]string {
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
	return f
}

// Every rejection made before the handler runs is a trailers-only
// response, the only kind a gRPC client may retry.
func TestRejectionsAreTrailersOnly(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		t.Run("full", func(t *testing.T) {
			g := newGate()
			addr, _ := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, g.handle)
			cc, _ := dial(t, addr, "")
			defer hold(t, cc, g)()
			f := checkTrailersOnly(t, rawCall(t, addr), "14", "1000")
			if f["retry-after"] != "1" {
				t.Errorf("retry-after %q, want 1", f["retry-after"])
			}
		})
		t.Run("queue-timeout", func(t *testing.T) {
			g := newGate()
			addr, _ := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: 20 * time.Millisecond}}, g.handle)
			cc, _ := dial(t, addr, "")
			defer hold(t, cc, g)()
			checkTrailersOnly(t, rawCall(t, addr), "14", "1000")
		})
		t.Run("caller-deadline-while-queued", func(t *testing.T) {
			g := newGate()
			addr, _ := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Minute}}, g.handle)
			cc, _ := dial(t, addr, "")
			defer hold(t, cc, g)()
			checkTrailersOnly(t, rawCall(t, addr, "grpc-timeout", "20m"), "4", "-1")
		})
		t.Run("deadline-expired-on-arrival", func(t *testing.T) {
			addr, _ := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, func(context.Context) error { return nil })
			checkTrailersOnly(t, rawCall(t, addr, "grpc-timeout", "0m"), "4", "-1")
		})
		t.Run("rate-limited", func(t *testing.T) {
			addr, _ := tg.serve(t, inbound.Options{RateLimit: &resilience.RateLimiterOptions{PermitLimit: 1, Window: time.Hour}}, func(context.Context) error { return nil })
			cc, _ := dial(t, addr, "")
			if err := invoke(context.Background(), cc); err != nil {
				t.Fatal(err)
			}
			f := checkTrailersOnly(t, rawCall(t, addr), "8", wait)
			if f["retry-after"] == "" || f["ratelimit-limit"] != "1" {
				t.Errorf("retry-after %q ratelimit-limit %q, want the limiter's fields", f["retry-after"], f["ratelimit-limit"])
			}
		})
		t.Run("shutting-down", func(t *testing.T) {
			addr, drain := tg.serve(t, inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}}, func(context.Context) error { return nil })
			drain()
			checkTrailersOnly(t, rawCall(t, addr), "14", "-1")
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
		addr, _ := tg.serve(t, inbound.Options{Timeout: 50 * time.Millisecond}, g.handle)
		frames := rawCall(t, addr)
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
