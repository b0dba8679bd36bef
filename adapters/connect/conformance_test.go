package resilienceconnect_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	resilienceconnect "github.com/ylcnfrht/resilience/adapters/connect"
	"github.com/ylcnfrht/resilience/conformance"
)

// connectHarness runs the suite over the Connect protocol's unary HTTP
// mapping: the suite's plain requests are what connect's ErrorWriter
// treats as Connect unary calls, so their rejections are Connect errors
// (HTTP 503/504/429 with Connect's JSON error body), read by
// decodeConnectError.
func connectHarness() conformance.Harness {
	return conformance.Harness{
		Name: "connect",
		Start: func(cfg conformance.Config) (*conformance.Server, error) {
			mw, err := resilienceconnect.New(cfg.Options)
			if err != nil {
				return nil, err
			}
			mux := http.NewServeMux()
			mux.Handle("GET "+conformance.HealthPath, cfg.Health)
			mux.Handle(conformance.RoutePattern, mw.Handler(cfg.Handler))
			mux.Handle("/", mw.Handler(cfg.Handler))
			return conformance.NewHTTPServer(mux, mw.Stats)
		},
		DecodeRejection: decodeConnectError,
		Missing: map[conformance.Capability]string{
			conformance.CapShutdownRetryAfter: "draining never ends on this instance, so gRPC clients are told not to retry here " +
				"(grpc-retry-pushback-ms -1), and no Retry-After contradicts that",
		},
	}
}

// TestConformance: the connect adapter behaves as the inbound table
// specifies, with Connect's error bodies.
func TestConformance(t *testing.T) {
	conformance.Run(t, connectHarness())
}

// connectHTTPStatus is the Connect protocol's HTTP status for each code a
// rejection uses.
var connectHTTPStatus = map[string]int{
	"unavailable":        http.StatusServiceUnavailable,
	"deadline_exceeded":  http.StatusGatewayTimeout,
	"resource_exhausted": http.StatusTooManyRequests,
	"internal":           http.StatusInternalServerError,
}

// decodeConnectError reads a Connect unary error body: JSON with the code
// matching the HTTP status, a message, and a google.rpc.ErrorInfo detail
// of the resilience domain whose reason is the inbound code.
func decodeConnectError(status int, header http.Header, body []byte) (conformance.Rejection, error) {
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return conformance.Rejection{}, fmt.Errorf("Content-Type %q, want application/json", ct)
	}
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		return conformance.Rejection{}, fmt.Errorf("body %q is not a Connect error: %v", body, err)
	}
	if want, ok := connectHTTPStatus[wire.Code]; !ok || want != status {
		return conformance.Rejection{}, fmt.Errorf("Connect code %q with HTTP status %d, want the status Connect maps it to", wire.Code, status)
	}
	for _, d := range wire.Details {
		if d.Type != "google.rpc.ErrorInfo" {
			continue
		}
		raw, err := connect.DecodeBinaryHeader(d.Value)
		if err != nil {
			return conformance.Rejection{}, fmt.Errorf("ErrorInfo value %q: %v", d.Value, err)
		}
		info, ok := parseErrorInfo(raw)
		if !ok || info.domain != resilienceconnect.ErrorDomain {
			return conformance.Rejection{}, fmt.Errorf("ErrorInfo %+v is not the resilience domain's", info)
		}
		if strings.Contains(wire.Message, "resilience:") {
			return conformance.Rejection{}, fmt.Errorf("message %q carries internal error text", wire.Message)
		}
		return conformance.Rejection{Code: info.reason, Reason: info.metadata["reason"], Message: wire.Message}, nil
	}
	return conformance.Rejection{}, fmt.Errorf("no google.rpc.ErrorInfo detail in %q", body)
}
