package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// lockedBuffer is stdout shared between run and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRun runs the program until the test ends and returns its address
// and its banner, once the banner is whole.
func startRun(t *testing.T) (addr, banner string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, nil, &out, os.Stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("exit code %d", code)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return")
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !strings.HasSuffix(out.String(), "/Build\n") || strings.Count(out.String(), "grpcurl ") < 5; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no whole banner:\n%s", out.String())
		}
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	return strings.TrimPrefix(first, "listening on "), out.String()
}

// Invariant: server reflection is registered outside the middleware: a
// reflection client lists the report service and resolves it to
// report.proto's descriptor.
func TestReflectionListsReportService(t *testing.T) {
	addr, _ := startRun(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, serviceName) {
		t.Errorf("list: %v, want %s in it", names, serviceName)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: serviceName}}); err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("no descriptor for %s: %v %v", serviceName, err, resp.GetErrorResponse())
	}
	_ = stream.CloseSend()
}

// Invariant: the shipped report.proto declares what the program registers:
// package, import and one rpc line per method (a stream where it streams).
func TestReportProtoMatchesDescriptor(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("proto", reportProtoFile))
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for l := range strings.SplitSeq(string(src), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			code = append(code, l)
		}
	}
	fd := reportFileDescriptor()
	want := []string{`syntax = "` + fd.GetSyntax() + `";`, "package " + fd.GetPackage() + ";"}
	for _, d := range fd.GetDependency() {
		want = append(want, `import "`+d+`";`)
	}
	for _, s := range fd.GetService() {
		want = append(want, "service "+s.GetName()+" {")
		for _, m := range s.GetMethod() {
			out := m.GetOutputType()[1:]
			if m.GetServerStreaming() {
				out = "stream " + out
			}
			want = append(want, "rpc "+m.GetName()+"("+m.GetInputType()[1:]+") returns ("+out+");")
		}
		want = append(want, "}")
	}
	if !slices.Equal(code, want) {
		t.Errorf("report.proto:\n%s\nwant (comments aside):\n%s", strings.Join(code, "\n"), strings.Join(want, "\n"))
	}
}

// Invariant: every grpcurl line the program prints works as printed,
// from the repository root. Without grpcurl on PATH the test skips,
// except under CI (.ci/run installs it), where it fails.
func TestTryLinesWork(t *testing.T) {
	if _, err := exec.LookPath("grpcurl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("grpcurl not on PATH under CI (.ci/run installs it): %v", err)
		}
		t.Skip("grpcurl not on PATH")
	}
	_, banner := startRun(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l := range strings.SplitSeq(banner, "\n") {
		if !strings.HasPrefix(l, "  grpcurl ") {
			continue
		}
		n++
		line := strings.TrimSpace(l)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		cancel()
		want := `"built in 200ms"`
		switch {
		case strings.HasSuffix(line, " list"):
			want = serviceName + "\n"
		case strings.Contains(line, " describe "):
			want = "rpc Follow ( .google.protobuf.Int64Value ) returns ( stream .google.protobuf.StringValue );"
		case strings.HasSuffix(line, "/Follow"):
			want = `"step 3 of 3"`
		}
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v\n%s\nwant %q in it", line, err, out, want)
		}
	}
	if n != 5 {
		t.Errorf("%d grpcurl lines, want 5:\n%s", n, banner)
	}
}
