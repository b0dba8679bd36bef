package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// grpcListeningLine is the first line of -framework grpc: HOST:PORT, the
// address gRPC clients dial, and no http:// scheme.
var grpcListeningLine = regexp.MustCompile(`^listening on (127\.0\.0\.1:[1-9][0-9]*) \(gRPC, plaintext\)$`)

// startGRPC runs the server with -framework grpc and args, waits for its
// whole banner and returns its address and banner; the server stops when
// the test ends.
func startGRPC(t *testing.T, args ...string) (addr, banner string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, append([]string{"-framework", "grpc"}, args...), &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(waitBound):
			t.Error("run did not return after its context was cancelled")
		}
	})
	m := grpcListeningLine.FindStringSubmatch(firstLine(t, &stdout, exited))
	if m == nil {
		t.Fatalf("first line does not match %v:\n%s", grpcListeningLine, stdout.String())
	}
	// The banner is written before the server serves; its last line is the
	// past-timeout call.
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(stdout.String(), "DEADLINE_EXCEEDED on time") || !strings.HasSuffix(stdout.String(), "Work\n") {
		if time.Now().After(deadline) {
			t.Fatalf("banner incomplete:\n%s", stdout.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return m[1], stdout.String()
}

// Invariant: -framework grpc registers server reflection outside the
// middleware: a reflection client lists the work service and resolves it
// to work.proto's descriptor, with both methods and their types.
func TestGRPCReflectionListsWorkService(t *testing.T) {
	addr, _ := startGRPC(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var names []string
	for _, s := range ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}).GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"resilience.example.v1.WorkService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("list: %v, want %s in it", names, want)
		}
	}
	resp := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "resilience.example.v1.WorkService"}})
	files := resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	if len(files) == 0 {
		t.Fatalf("no descriptor for the work service: %v", resp.GetErrorResponse())
	}
	fd := new(descriptorpb.FileDescriptorProto)
	if err := proto.Unmarshal(files[0], fd); err != nil {
		t.Fatal(err)
	}
	if fd.GetName() != workProtoFile || len(fd.GetService()) != 1 {
		t.Fatalf("descriptor %s with %d services, want %s with 1", fd.GetName(), len(fd.GetService()), workProtoFile)
	}
	var methods []string
	for _, m := range fd.GetService()[0].GetMethod() {
		methods = append(methods, "/"+fd.GetPackage()+"."+fd.GetService()[0].GetName()+"/"+m.GetName()+" "+m.GetInputType()+" "+m.GetOutputType())
	}
	want := []string{
		workProcedure + " .google.protobuf.Int64Value .google.protobuf.StringValue",
		cooperativeProcedure + " .google.protobuf.Int64Value .google.protobuf.StringValue",
	}
	if !slices.Equal(methods, want) {
		t.Errorf("methods %q, want %q", methods, want)
	}
}

// Invariant: the shipped work.proto declares what the server registers:
// its package, its import and one rpc line per method, nothing more.
func TestWorkProtoMatchesDescriptor(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("proto", workProtoFile))
	if err != nil {
		t.Fatal(err)
	}
	fd := workFileDescriptor()
	var code []string // the file without comments and blank lines
	for l := range strings.SplitSeq(string(src), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			code = append(code, l)
		}
	}
	want := []string{`syntax = "` + fd.GetSyntax() + `";`, "package " + fd.GetPackage() + ";"}
	for _, d := range fd.GetDependency() {
		want = append(want, `import "`+d+`";`)
	}
	for _, s := range fd.GetService() {
		want = append(want, "service "+s.GetName()+" {")
		for _, m := range s.GetMethod() {
			want = append(want, "rpc "+m.GetName()+"("+m.GetInputType()[1:]+") returns ("+m.GetOutputType()[1:]+");")
		}
		want = append(want, "}")
	}
	if !slices.Equal(code, want) {
		t.Errorf("work.proto:\n%s\nwant (comments aside):\n%s", strings.Join(code, "\n"), strings.Join(want, "\n"))
	}
}

// Invariant: every grpcurl line the grpc banner prints works exactly as
// printed, from the repository root: list shows the work service,
// describe shows it as work.proto does, the calls answer, and the call
// past -timeout gets DEADLINE_EXCEEDED. Without grpcurl on PATH the test
// skips, except under CI (.ci/run installs it), where it fails.
func TestGRPCTryLinesWork(t *testing.T) {
	if _, err := exec.LookPath("grpcurl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("grpcurl not on PATH under CI (.ci/run installs it): %v", err)
		}
		t.Skip("grpcurl not on PATH (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@" + grpcurlVersion + ")")
	}
	_, banner := startGRPC(t, "-timeout", "300ms")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sh := func(line string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), waitBound)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var lines []string
	for l := range strings.SplitSeq(banner, "\n") {
		if strings.HasPrefix(l, "  grpcurl ") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) != 7 {
		t.Fatalf("%d grpcurl lines, want 7:\n%s", len(lines), banner)
	}
	var described string
	for _, line := range lines {
		out, err := sh(line)
		switch {
		case strings.Contains(line, " -d 1300 "):
			if err == nil || !strings.Contains(out, "Code: DeadlineExceeded") || !strings.Contains(out, `"reason": "TIMEOUT"`) {
				t.Errorf("%s: %v\n%s\nwant DeadlineExceeded, reason TIMEOUT", line, err, out)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v\n%s", line, err, out)
			continue
		}
		var want string
		switch {
		case strings.HasSuffix(line, " list"):
			want = "resilience.example.v1.WorkService\n"
		case strings.Contains(line, " describe "):
			want, described = "rpc Work ( .google.protobuf.Int64Value ) returns ( .google.protobuf.StringValue );", out
		case strings.HasSuffix(line, "Health/Check"):
			want = `"status": "SERVING"`
		default:
			want = `"worked 200ms"`
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s:\n%s\nwant %q in it", line, out, want)
		}
	}
	// Reflection describes the service as the shipped .proto does.
	fromProto, err := sh("grpcurl -import-path examples/server/proto -proto " + workProtoFile + " describe resilience.example.v1.WorkService")
	if err != nil {
		t.Fatalf("describe from work.proto: %v\n%s", err, fromProto)
	}
	var uncommented []string
	for l := range strings.SplitSeq(fromProto, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			uncommented = append(uncommented, l)
		}
	}
	if got := strings.Join(uncommented, "\n"); got != described {
		t.Errorf("describe from work.proto (comments aside):\n%s\nfrom reflection:\n%s", got, described)
	}
}

// Invariant: .ci/run installs the grpcurl release the banner names.
func TestCIInstallsBannerGrpcurl(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\nGRPCURL_VERSION="+grpcurlVersion+" ") {
		t.Errorf(".ci/run does not pin GRPCURL_VERSION=%s", grpcurlVersion)
	}
}

// Invariant: with -framework connect the banner's RPC lines work as
// printed, from the repository root: curl's Connect call and grpcurl's
// gRPC call from the shipped .proto both get the work's answer. Each runs
// when its tool is on PATH; under CI a missing grpcurl fails.
func TestConnectTryLinesWork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"-framework", "connect"}, &stdout, &stderr) }()
	defer func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(waitBound):
			t.Error("run did not return after its context was cancelled")
		}
	}()
	if m := listeningLine.FindStringSubmatch(firstLine(t, &stdout, exited)); m == nil {
		t.Fatalf("first line does not match %v:\n%s", listeningLine, stdout.String())
	}
	deadline := time.Now().Add(waitBound)
	for !strings.Contains(stdout.String(), " resilience.example.v1.WorkService/Work\n") {
		if time.Now().After(deadline) {
			t.Fatalf("banner without the RPC lines:\n%s", stdout.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for l := range strings.SplitSeq(stdout.String(), "\n") {
		tool, _, _ := strings.Cut(strings.TrimSpace(l), " ")
		if !strings.HasPrefix(l, "  ") || (tool != "grpcurl" && !strings.Contains(l, workProcedure)) {
			continue
		}
		if _, err := exec.LookPath(tool); err != nil {
			if tool == "grpcurl" && os.Getenv("CI") != "" {
				t.Fatalf("grpcurl not on PATH under CI (.ci/run installs it): %v", err)
			}
			t.Logf("%s not on PATH: %s not run", tool, strings.TrimSpace(l))
			continue
		}
		cctx, ccancel := context.WithTimeout(t.Context(), waitBound)
		cmd := exec.CommandContext(cctx, "sh", "-c", strings.TrimSpace(l))
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		ccancel()
		if err != nil || !strings.Contains(string(out), `"worked 200ms"`) {
			t.Errorf("%s: %v\n%s\nwant \"worked 200ms\"", strings.TrimSpace(l), err, out)
		}
		ran++
	}
	t.Logf("%d RPC lines run", ran)
}
