package resilienceconnect_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// countingCodec is connect's protobuf codec, counting the request
// messages it decodes.
type countingCodec struct{ decoded *atomic.Int64 }

func (countingCodec) Name() string                  { return "proto" }
func (countingCodec) Marshal(m any) ([]byte, error) { return proto.Marshal(m.(proto.Message)) }
func (c countingCodec) Unmarshal(b []byte, m any) error {
	c.decoded.Add(1)
	return proto.Unmarshal(b, m.(proto.Message))
}

// TestShedCallIsNotDecoded: the middleware admits before connect reads
// the request: a call refused for capacity has its message never decoded,
// in any protocol, while an admitted one is decoded once.
func TestShedCallIsNotDecoded(t *testing.T) {
	var decoded atomic.Int64
	mw, err := resilienceconnect.New(inbound.Options{Concurrency: &resilience.ConcurrencyLimiterOptions{PermitLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService()
	srv := httptest.NewUnstartedServer(mw.Handler(svc.mux(connect.WithCodec(countingCodec{&decoded}))))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	ts := &testServer{url: srv.URL, client: &http.Client{Transport: tr}, mw: mw, svc: svc}

	held := ts.callSay(t.Context(), protocols[1], msgHold)
	ts.svc.waitEntered(t, sayProcedure)
	if n := decoded.Load(); n != 1 {
		t.Fatalf("the admitted call was decoded %d times, want 1", n)
	}
	for _, p := range protocols {
		_, err := ts.say(p).CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
		expectCode(t, p.name, err, connect.CodeUnavailable, inbound.CodeBulkheadFull, "full")
	}
	if n := decoded.Load(); n != 1 {
		t.Errorf("%d messages decoded after three refused calls, want still 1", n)
	}
	ts.svc.open()
	if err := await(t, "held call", held); err != nil {
		t.Error(err)
	}
}
