package resilienceconnect_test

import (
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
)

// The tests decode the rejection details by hand, as a client without the
// generated google.rpc packages would.

type errorInfo struct {
	reason, domain string
	metadata       map[string]string
}

func errorInfoOf(e *connect.Error) (errorInfo, bool) {
	for _, d := range e.Details() {
		if d.Type() == "google.rpc.ErrorInfo" {
			return parseErrorInfo(d.Bytes())
		}
	}
	return errorInfo{}, false
}

// parseErrorInfo decodes a google.rpc.ErrorInfo message.
func parseErrorInfo(b []byte) (errorInfo, bool) {
	info := errorInfo{metadata: map[string]string{}}
	ok := eachField(b, func(num protowire.Number, v []byte) {
		switch num {
		case 1:
			info.reason = string(v)
		case 2:
			info.domain = string(v)
		case 3:
			var k, val string
			eachField(v, func(n protowire.Number, b []byte) {
				if n == 1 {
					k = string(b)
				} else if n == 2 {
					val = string(b)
				}
			})
			info.metadata[k] = val
		}
	})
	return info, ok
}

// retryDelayOf returns the google.rpc.RetryInfo delay of e.
func retryDelayOf(e *connect.Error) (time.Duration, bool) {
	for _, d := range e.Details() {
		if d.Type() != "google.rpc.RetryInfo" {
			continue
		}
		var delay time.Duration
		ok := eachField(d.Bytes(), func(num protowire.Number, v []byte) {
			if num != 1 {
				return
			}
			// google.protobuf.Duration: seconds (1), nanos (2), varints.
			for len(v) > 0 {
				n, typ, tl := protowire.ConsumeTag(v)
				if tl < 0 || typ != protowire.VarintType {
					return
				}
				x, xl := protowire.ConsumeVarint(v[tl:])
				if xl < 0 {
					return
				}
				if n == 1 {
					delay += time.Duration(x) * time.Second
				} else {
					delay += time.Duration(x)
				}
				v = v[tl+xl:]
			}
		})
		return delay, ok
	}
	return 0, false
}

// eachField calls f with each length-delimited field of a message and
// reports whether the message parsed.
func eachField(b []byte, f func(protowire.Number, []byte)) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return false
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return false
		}
		f(num, v)
		b = b[m:]
	}
	return true
}
