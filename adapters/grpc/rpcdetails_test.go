package resiliencegrpc_test

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// TestRPCDetailsAsGenerated: the details core encodes by hand are the
// bytes the generated google.rpc messages marshal to, so the
// grpc-status-details-bin of every rejection is what errdetails would
// send.
func TestRPCDetailsAsGenerated(t *testing.T) {
	sts := adapt.RPCConstStatuses(1500 * time.Millisecond)
	rate, _ := adapt.RPCStatusOf(&resilience.RateLimitRejectedError{RetryAfter: 2*time.Second + time.Millisecond}, 0)
	sts = append(sts, rate)
	for _, st := range sts {
		info := &errdetails.ErrorInfo{Reason: st.ErrorCode, Domain: adapt.RPCErrorDomain}
		if st.Reason != "" {
			info.Metadata = map[string]string{"reason": st.Reason}
		}
		want, err := proto.Marshal(info)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.ErrorInfo(); !bytes.Equal(got.Value, want) || got.TypeURL != "type.googleapis.com/"+string(proto.MessageName(info)) {
			t.Errorf("%s ErrorInfo %s %x, want %x", st.ErrorCode, got.TypeURL, got.Value, want)
		}
		ri, ok := st.RetryInfo()
		if ok != (st.RetryAfter > 0) {
			t.Errorf("%s RetryInfo: %v, want it with a wait of %v", st.ErrorCode, ok, st.RetryAfter)
		}
		if !ok {
			continue
		}
		retry := &errdetails.RetryInfo{RetryDelay: durationpb.New(st.RetryAfter)}
		want, err = proto.Marshal(retry)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ri.Value, want) || ri.TypeURL != "type.googleapis.com/"+string(proto.MessageName(retry)) {
			t.Errorf("%s RetryInfo %s %x, want %x", st.ErrorCode, ri.TypeURL, ri.Value, want)
		}
	}
}
