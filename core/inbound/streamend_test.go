package inbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	resilience "github.com/ylcnfrht/resilience/core"
)

// endAnswer is a DeadlineAnswer whose protocol ends a stream with an end
// message in the body, as Connect's and gRPC-Web's do.
type endAnswer struct{}

func (endAnswer) Answer(w http.ResponseWriter, _ error) { _, _ = w.Write([]byte("ANSWER")) }
func (endAnswer) End(w http.ResponseWriter, _ error) bool {
	_, _ = w.Write([]byte("|DEADLINE"))
	return true
}
func (endAnswer) Sent([]byte)   {}
func (endAnswer) Streams() bool { return true }

// A committed stream gets exactly one end when the deadline comes from a
// custom pipeline's timeout, the caller's or an upstream one, which end
// the handler's context's parent: either the handler's own end, written in
// time, or the answerer's, never the answerer's after the handler's (or
// the answerer's answer alone, for a deadline before the first message).
//
// It runs in real time: a detached request's ServeHTTP waits on a mutex,
// which a synctest bubble does not count as durably blocked. The deadlines
// are short and nothing is asserted about when they fire.
func TestCommittedStreamEndsOnceAtPipelineOrCallerDeadline(t *testing.T) {
	const rounds = 300
	const d = time.Millisecond
	cases := []struct {
		name     string
		timeout  time.Duration // the pipeline's timeout strategy (0: none)
		caller   time.Duration // the caller's deadline (0: none)
		optsTime time.Duration // Options.Timeout
		upstream time.Duration // the request context's own deadline (0: none)
	}{
		{"pipeline timeout", d, 0, 0, 0},
		{"pipeline timeout before Options.Timeout", d, 0, time.Minute, 0},
		{"caller deadline under a pipeline", time.Minute, d, 0, 0},
		{"caller deadline", 0, d, 0, 0},
		{"upstream deadline before Options.Timeout", 0, 0, time.Minute, d},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Timeout: tc.optsTime}
			if tc.timeout > 0 {
				p, err := resilience.NewBuilder[struct{}]().AddTimeout(resilience.TimeoutOptions{Timeout: tc.timeout}).Build()
				if err != nil {
					t.Fatal(err)
				}
				opts.Pipeline = p
			}
			m := mustNew(t, opts)
			for i := range rounds {
				w := newSyncRecorder()
				exited := make(chan struct{})
				stream := func(w http.ResponseWriter, r *http.Request, _ any) {
					defer close(exited)
					_, _ = w.Write([]byte("MSG"))
					http.NewResponseController(w).Flush() //nolint:errcheck // commits
					<-r.Context().Done()
					_, _ = w.Write([]byte("|END"))
				}
				var deadline time.Time
				if tc.caller > 0 {
					deadline = time.Now().Add(tc.caller)
				}
				req := httptest.NewRequest(http.MethodPost, "/", nil)
				cancel := context.CancelFunc(func() {})
				if tc.upstream > 0 {
					var ctx context.Context
					ctx, cancel = context.WithTimeout(req.Context(), tc.upstream)
					req = req.WithContext(ctx)
				}
				req.ProtoMajor, req.ProtoMinor = 2, 0
				func() {
					defer func() {
						if v := recover(); v != nil && v != http.ErrAbortHandler {
							panic(v)
						}
					}()
					_ = m.serveAnswering(w, req, nil, stream, deadline, endAnswer{})
				}()
				<-exited
				cancel()
				switch _, _, got := w.result(); got {
				case "MSG|END", "MSG|DEADLINE", "MSG", "ANSWER":
				default:
					t.Fatalf("round %d: the stream was %q: ended twice", i, got)
				}
			}
			// The last handler has returned; the engine records it
			// just after, on the request's goroutine.
			waitFor(t, func() bool { s := m.Stats(); return s.InFlight == 0 && s.Late == 0 })
		})
	}
}
