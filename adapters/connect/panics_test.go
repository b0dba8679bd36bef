package resilienceconnect_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// What a Connect client of a panicking handler receives: with neither the
// option nor connect's WithRecover the connection is dropped (the client
// sees Unavailable); with AnswerPanics, or behind WithRecover, an Internal
// error. In every case the permit is back and the next call runs.
func TestPanicAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    bool
		recoverer bool
		want      connect.Code
	}{
		{"neither", false, false, connect.CodeUnavailable},
		{"AnswerPanics", true, false, connect.CodeInternal},
		{"WithRecover", false, true, connect.CodeInternal},
		{"both", true, true, connect.CodeInternal},
	} {
		for _, timeout := range []time.Duration{0, time.Minute} {
			mw, err := resilienceconnect.New(inbound.Options{
				Timeout:      timeout,
				Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second},
				AnswerPanics: tc.answer,
			})
			if err != nil {
				t.Fatal(err)
			}
			opts := []connect.HandlerOption{mw.HandlerOption()}
			if tc.recoverer {
				opts = append(opts, connect.WithRecover(func(context.Context, connect.Spec, http.Header, any) error {
					return connect.NewError(connect.CodeInternal, errors.New("internal"))
				}))
			}
			const procedure = "/greet.v1.GreetService/Greet"
			h := connect.NewUnaryHandler(procedure, func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
				if req.Msg.GetValue() == "panic" {
					panic("a handler's bug")
				}
				return connect.NewResponse(wrapperspb.String("ok")), nil
			}, opts...)
			mux := http.NewServeMux()
			mux.Handle(procedure, mw.Handler(h))
			srv := httptest.NewUnstartedServer(mux)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.Start()
			client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](srv.Client(), srv.URL+procedure)
			_, err = client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("panic")))
			if got := connect.CodeOf(err); got != tc.want {
				t.Errorf("%s, timeout %v: the client got %v (%v), want %v", tc.name, timeout, got, err, tc.want)
			}
			if st := mw.Stats(); st.InFlight != 0 {
				t.Errorf("%s, timeout %v: %d in flight after the panic", tc.name, timeout, st.InFlight)
			}
			if res, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("x"))); err != nil || res.Msg.GetValue() != "ok" {
				t.Errorf("%s, timeout %v: the next call: %v", tc.name, timeout, err)
			}
			srv.Client().CloseIdleConnections()
			srv.Close()
		}
	}
}
