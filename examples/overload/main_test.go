package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ylcnfrht/resilience/examples/overload/lab"
)

// The lab starts servers, clients and, for the cpu scenario, a child
// process running this test binary: no goroutine may survive a run.
func TestMain(m *testing.M) {
	lab.ServeChildIfAsked(lab.Ours())
	goleak.VerifyTestMain(m)
}

// runLab runs the program with args and returns stdout; it fails the
// test unless the exit code is 0.
func runLab(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("run %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// svgDoc is the part of the chart the test checks.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Paths   []struct {
		D string `xml:"d,attr"`
	} `xml:"path"`
	Texts []string `xml:"text"`
}

// A short run prints one table row per mode, writes a well-formed SVG with
// a line per mode in each panel (plus the capacity line), axes with units
// and a legend, and JSON whose figures match the mode list.
func TestShortRunPrintsTableAndChart(t *testing.T) {
	dir := t.TempDir()
	svgPath, jsonPath := filepath.Join(dir, "c.svg"), filepath.Join(dir, "r.json")
	out := runLab(t, "-duration", "2s", "-rate", "300", "-client-timeout", "10s", "-timeout", "10s", "-modes", "none,fixed", "-quiet", "-svg", svgPath, "-json", jsonPath)

	for _, want := range []string{"scenario overload", "goodput/s", "p99 ms", "shed p99 ms", "wasted", "chart: " + svgPath} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, mode := range []string{"none", "fixed"} {
		if !regexp.MustCompile(`(?m)^\s*` + mode + `\s+\d+\s+\d+`).MatchString(out) {
			t.Errorf("no table row for %s:\n%s", mode, out)
		}
	}

	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc svgDoc
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("chart is not well-formed SVG: %v", err)
	}
	if got, want := len(doc.Paths), 3*2+1; got != want {
		t.Errorf("chart has %d lines, want %d (3 panels × 2 modes + capacity)", got, want)
	}
	for i, p := range doc.Paths {
		if !strings.HasPrefix(p.D, "M") || !strings.Contains(p.D, "L") {
			t.Errorf("line %d has no segment: %q", i, p.D)
		}
	}
	texts := strings.Join(doc.Texts, "|")
	for _, want := range []string{"time (s)", "req/s", "shed", "(ms)", "none", "fixed", "capacity"} {
		if !strings.Contains(texts, want) {
			t.Errorf("chart lacks the label %q", want)
		}
	}

	f, err := os.Open(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rep lab.Report
	if err := json.NewDecoder(f).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Contender != "none" || rep.Results[1].Contender != "fixed" {
		t.Fatalf("json results = %+v, want none then fixed", rep.Results)
	}
	for _, r := range rep.Results {
		// 300 req/s is well under the 500 req/s capacity and the clients
		// wait 10 s: everything is answered (the even arrivals send exactly
		// 600 requests).
		if r.Sent != 600 || r.OK != 600 {
			t.Errorf("%s: sent %d, ok %d; want 600 and 600 under capacity", r.Contender, r.Sent, r.OK)
		}
	}
}

// The cpu scenario runs its service in a child process (this test binary
// again, through TestMain) and reports the measured capacity; on Linux
// with two CPUs or more the generator and the service are pinned apart,
// and the header says so.
func TestCPUScenarioUsesChildProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("calibrates for a few seconds")
	}
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "r.json")
	out := runLab(t, "-scenario", "cpu", "-duration", "1s", "-modes", "fixed", "-quiet", "-svg", filepath.Join(dir, "c.svg"), "-json", jsonPath)
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep lab.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Capacity <= 0 || rep.CPURounds <= 0 {
		t.Fatalf("capacity %v, rounds %d: the child did not calibrate", rep.Capacity, rep.CPURounds)
	}
	if want := float64(int(1.6*rep.Capacity + 0.5)); rep.Config.Rate != want {
		t.Errorf("offered rate %v, want 1.6 × capacity = %v", rep.Config.Rate, want)
	}
	if r := rep.Results[0]; r.OK == 0 {
		t.Errorf("the cpu service answered nothing in time: %+v", r)
	}
	if rep.ServiceProcs < 1 {
		t.Errorf("service GOMAXPROCS %d: the child did not report it", rep.ServiceProcs)
	}
	if runtime.GOOS == "linux" && runtime.NumCPU() >= 2 {
		if !strings.HasPrefix(rep.Pinning, "generator on CPU ") || !strings.Contains(out, "("+rep.Pinning+")") {
			t.Errorf("pinning %q, header:\n%s\nwant the generator and the service pinned apart, in the header", rep.Pinning, out)
		}
	}
}

// The cpu preset pins on machines with two CPUs or more, -pin=false turns
// it off, and -pin turns it on for any scenario.
func TestPinFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"-scenario", "cpu"}, runtime.NumCPU() >= 2},
		{[]string{"-scenario", "cpu", "-pin=false"}, false},
		{[]string{"-scenario", "overload"}, false},
		{[]string{"-scenario", "overload", "-pin"}, true},
	} {
		o, err := parse(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if o.cfg.PinCPUs != tc.want {
			t.Errorf("%v: PinCPUs %v, want %v", tc.args, o.cfg.PinCPUs, tc.want)
		}
	}
}

// Invalid flags exit 2 with a message naming the flag.
func TestInvalidFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "nope"}, "-scenario"},
		{[]string{"-modes", "fixed,nope"}, "-modes"},
		{[]string{"-steps", "10s"}, "-steps"},
		{[]string{"-arrivals", "burst"}, "arrivals"},
		{[]string{"-high", "2"}, "high"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), tc.args, io.Discard, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not name %s", tc.args, stderr.String(), tc.want)
		}
	}
}
