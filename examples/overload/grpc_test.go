package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestGRPCProtocol: -protocol grpc loads the slot service over gRPC behind
// the adapter and prints a row per mode with calls answered.
func TestGRPCProtocol(t *testing.T) {
	var out bytes.Buffer
	code := run(context.Background(), []string{"-protocol", "grpc", "-duration", "1s", "-rate", "40", "-slots", "10", "-service-time", "20ms",
		"-modes", "none,fixed-codel", "-quiet"}, &out, io.Discard)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	for _, mode := range []string{"none", "fixed-codel"} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && f[0] == mode && f[2] != "0" {
				found = true
			}
		}
		if !found {
			t.Errorf("no row for %s with calls answered:\n%s", mode, out.String())
		}
	}
}

// TestGRPCProtocolRefusesUnsupported: an unknown protocol is a flag error,
// and a scenario the gRPC mode cannot drive fails clearly.
func TestGRPCProtocolRefusesUnsupported(t *testing.T) {
	if code := run(context.Background(), []string{"-protocol", "quic"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("-protocol quic: exit %d, want 2", code)
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"-protocol", "grpc", "-scenario", "step", "-quiet"}, io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), "-protocol grpc") {
		t.Errorf("-protocol grpc -scenario step: exit %d, %q", code, errOut.String())
	}
}
