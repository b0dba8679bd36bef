package resilienceconnect

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// wire is the shape of a call on the wire, as far as the middleware needs
// it: which protocol's deadline header to read and how a response that has
// started can still be ended properly.
type wire uint8

const (
	// wireConnectUnary is the Connect protocol's unary mapping (and any
	// request that is no RPC at all): plain HTTP status and body.
	wireConnectUnary wire = iota
	// wireConnectStream is the Connect streaming protocol: enveloped
	// messages ended by an end-of-stream envelope.
	wireConnectStream
	// wireGRPC is gRPC: enveloped messages ended by HTTP/2 trailers.
	wireGRPC
	// wireGRPCWeb is gRPC-Web: enveloped messages ended by a trailers
	// envelope.
	wireGRPCWeb
)

// classify tells the protocol from the method and Content-Type, the way
// connect's handlers and ErrorWriter do. A request in no RPC protocol is
// treated as Connect unary, whose errors are plain HTTP statuses.
func classify(r *http.Request) wire {
	if r.Method != http.MethodPost {
		return wireConnectUnary
	}
	ct := r.Header.Get("Content-Type")
	switch {
	case hasPrefixFold(ct, "application/grpc-web"):
		return wireGRPCWeb
	case hasPrefixFold(ct, "application/grpc"):
		return wireGRPC
	case hasPrefixFold(ct, "application/connect+"):
		return wireConnectStream
	}
	return wireConnectUnary
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// protocol is the connect protocol name of w (connect.ProtocolConnect and
// the others), for Peer.Protocol.
func (w wire) protocol() string {
	switch w {
	case wireGRPC:
		return connect.ProtocolGRPC
	case wireGRPCWeb:
		return connect.ProtocolGRPCWeb
	}
	return connect.ProtocolConnect
}

// enveloped reports whether the response body is a sequence of
// length-prefixed envelopes that the protocol ends with an envelope or
// trailers of its own.
func (w wire) enveloped() bool { return w != wireConnectUnary }

// errNoTimeout means the caller sent no deadline (or one too large to
// matter).
var errNoTimeout = errors.New("no timeout")

// callerTimeout returns the timeout the caller sent in its protocol's
// header: Connect-Timeout-Ms for Connect, grpc-timeout for gRPC and
// gRPC-Web. It returns errNoTimeout when there is none, and an
// InvalidArgument *connect.Error for a malformed value, which connect's
// handler would refuse the same way.
func callerTimeout(w wire, h http.Header) (time.Duration, error) {
	if w == wireGRPC || w == wireGRPCWeb {
		return parseGRPCTimeout(h.Get("Grpc-Timeout"))
	}
	return parseConnectTimeout(h.Get("Connect-Timeout-Ms"))
}

// parseConnectTimeout parses Connect-Timeout-Ms: at most 10 digits of
// milliseconds, not negative.
func parseConnectTimeout(v string) (time.Duration, error) {
	if v == "" {
		return 0, errNoTimeout
	}
	if len(v) > 10 {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("parse timeout: "+strconv.Quote(v)+" has >10 digits"))
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("parse timeout: invalid syntax"))
	}
	if ms < 0 {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("parse timeout: "+strconv.Quote(v)+" is negative"))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// parseGRPCTimeout parses grpc-timeout: at most 8 digits and a unit
// (n, u, m, S, M, H). An hour count too large for a time.Duration means no
// timeout, as in gRPC's implementations.
func parseGRPCTimeout(v string) (time.Duration, error) {
	if v == "" {
		return 0, errNoTimeout
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'n':
		unit = time.Nanosecond
	case 'u':
		unit = time.Microsecond
	case 'm':
		unit = time.Millisecond
	case 'S':
		unit = time.Second
	case 'M':
		unit = time.Minute
	case 'H':
		unit = time.Hour
	default:
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("protocol error: timeout has invalid unit "+strconv.QuoteRune(rune(v[len(v)-1]))))
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("protocol error: invalid timeout "+strconv.Quote(v)))
	}
	if n > 99999999 {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("protocol error: timeout "+strconv.Quote(v)+" is too long"))
	}
	if unit == time.Hour && n > math.MaxInt64/int64(time.Hour) {
		return 0, errNoTimeout
	}
	return time.Duration(n) * unit, nil
}
