package resilienceconnect

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDependencies: a user who adds the adapter gets core and connect and
// nothing else. The package's code imports only the standard library,
// core, connect and protobuf (which connect itself requires); the module
// requires besides those only what its tests need (the conformance suite
// and goleak), so no other framework enters a user's module graph.
func TestDependencies(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			switch {
			case !strings.Contains(first, "."): // the standard library
			case path == "connectrpc.com/connect",
				strings.HasPrefix(path, "google.golang.org/protobuf/"),
				path == "github.com/ylcnfrht/resilience/core",
				strings.HasPrefix(path, "github.com/ylcnfrht/resilience/core/") && !strings.Contains(path, "/internal"):
			default:
				t.Errorf("%s imports %s: the adapter's code may import only core, connect and protobuf", name, path)
			}
		}
	}

	allowed := map[string]string{
		"connectrpc.com/connect":                     "the framework",
		"google.golang.org/protobuf":                 "connect's own dependency",
		"github.com/ylcnfrht/resilience/core":        "core and core/inbound",
		"github.com/ylcnfrht/resilience/conformance": "tests: the conformance suite",
		"go.uber.org/goleak":                         "tests: goroutine leaks",
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	inRequire := false
	for _, line := range strings.Split(string(mod), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inRequire = true
			continue
		case inRequire && line == ")":
			inRequire = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inRequire:
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "//") {
			continue
		}
		if _, ok := allowed[fields[0]]; !ok {
			t.Errorf("go.mod requires %s: only core, connect and the tests' modules belong there", fields[0])
		}
	}
}
