// Package docs_test holds the test that keeps the documentation's Go
// snippets compiling.
package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// markdown lists the files whose ```go blocks must compile, relative to
// the repository root (globs).
var markdown = []string{"README.md", "docs/guide.md", "adapters/*/README.md", "extensions/*/README.md"}

// imports maps the package names the snippets use to their import paths:
// a snippet names a package, the test imports it.
var imports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "io": "io", "log": "log",
	"http": "net/http", "net": "net", "netip": "net/netip", "os": "os", "slog": "log/slog",
	"strconv": "strconv", "strings": "strings", "time": "time", "signal": "os/signal",

	"resilience": "github.com/ylcnfrht/resilience/core",
	"budget":     "github.com/ylcnfrht/resilience/core/budget",
	"event":      "github.com/ylcnfrht/resilience/core/event",
	"inbound":    "github.com/ylcnfrht/resilience/core/inbound",
	"adapt":      "github.com/ylcnfrht/resilience/core/inbound/adapt",
	"by":         "github.com/ylcnfrht/resilience/core/inbound/by",
	"ready":      "github.com/ylcnfrht/resilience/core/inbound/ready",
	"limit":      "github.com/ylcnfrht/resilience/core/limit",
	"outbound":   "github.com/ylcnfrht/resilience/core/outbound",
	"property":   "github.com/ylcnfrht/resilience/core/property",
	"ratelimit":  "github.com/ylcnfrht/resilience/core/ratelimit",
	"retryafter": "github.com/ylcnfrht/resilience/core/retryafter",
	"throttle":   "github.com/ylcnfrht/resilience/core/throttle",

	"resiliencechi":     "github.com/ylcnfrht/resilience/adapters/chi",
	"resilienceconnect": "github.com/ylcnfrht/resilience/adapters/connect",
	"resilienceecho":    "github.com/ylcnfrht/resilience/adapters/echo",
	"resiliencefiber":   "github.com/ylcnfrht/resilience/adapters/fiber",
	"resiliencegin":     "github.com/ylcnfrht/resilience/adapters/gin",
	"resiliencegrpc":    "github.com/ylcnfrht/resilience/adapters/grpc",
	"resilienceotel":    "github.com/ylcnfrht/resilience/extensions/otel",
	"promrules":         "github.com/ylcnfrht/resilience/extensions/otel/promrules",
	"resilienceredis":   "github.com/ylcnfrht/resilience/extensions/redis",

	"chi":            "github.com/go-chi/chi/v5",
	"middleware":     "github.com/go-chi/chi/v5/middleware",
	"connect":        "connectrpc.com/connect",
	"echo":           "github.com/labstack/echo/v4",
	"echomw":         "github.com/labstack/echo/v4/middleware",
	"fiber":          "github.com/gofiber/fiber/v2",
	"recover":        "github.com/gofiber/fiber/v2/middleware/recover",
	"gin":            "github.com/gin-gonic/gin",
	"grpc":           "google.golang.org/grpc",
	"health":         "google.golang.org/grpc/health",
	"healthpb":       "google.golang.org/grpc/health/grpc_health_v1",
	"insecure":       "google.golang.org/grpc/credentials/insecure",
	"redis":          "github.com/redis/go-redis/v9",
	"otel":           "go.opentelemetry.io/otel",
	"sdkmetric":      "go.opentelemetry.io/otel/sdk/metric",
	"otelprom":       "go.opentelemetry.io/otel/exporters/prometheus",
	"prometheus":     "github.com/prometheus/client_golang/prometheus",
	"promhttp":       "github.com/prometheus/client_golang/prometheus/promhttp",
	"otlptranslator": "github.com/prometheus/otlptranslator",
}

// A snippet is one ```go block and what its marker says about it.
type snippet struct {
	file string // relative to the repository root
	line int    // of the block's first line of code
	code string
	// example names the Example function the block shows ("ExampleNew in
	// core/inbound"); such a block is that test's body, compiled there.
	example, exampleDir string
	// prelude is Go declarations (stubs for what the block uses but does
	// not declare) from the marker; "/* snippet */" in it marks where the
	// block goes, else the block is a function body after it.
	prelude string
}

// marker is an HTML comment on the line before a block:
//
//	<!-- snippet: ExampleName in dir -->   the block is that Example's body
//	<!-- snippet
//	Go declarations …                      stubs; /* snippet */ places the block
//	-->
var exampleMarker = regexp.MustCompile(`^<!-- snippet: (Example\w*) in ([\w/.-]+) -->$`)

// readSnippets returns every ```go block of the markdown files.
func readSnippets(t *testing.T, root string) []snippet {
	t.Helper()
	var files []string
	for _, g := range markdown {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var out []snippet
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		lines := strings.Split(string(src), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```go" {
				continue
			}
			s := snippet{file: rel, line: i + 2}
			// The marker ends on the line before the block.
			if i > 0 {
				prev := strings.TrimSpace(lines[i-1])
				if m := exampleMarker.FindStringSubmatch(prev); m != nil {
					s.example, s.exampleDir = m[1], m[2]
				} else if prev == "-->" {
					j := i - 2
					for j >= 0 && strings.TrimSpace(lines[j]) != "<!-- snippet" {
						j--
					}
					if j < 0 {
						t.Fatalf("%s:%d: a comment before the block that is no snippet marker", rel, i)
					}
					s.prelude = strings.Join(lines[j+1:i-1], "\n")
				}
			}
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
				j++
			}
			s.code = strings.Join(lines[i+1:j], "\n")
			out = append(out, s)
			i = j
		}
	}
	return out
}

// source is the snippet as a Go file of its own package: the prelude, the
// block (behind a //line directive, so errors name the markdown line), a
// use of every variable the block declares at its top level, and the
// imports of the packages it names.
func (s snippet) source(t *testing.T) string {
	var b strings.Builder
	b.WriteString("package snippet\n\n")
	if strings.HasPrefix(strings.TrimSpace(s.code), "package ") {
		return fmt.Sprintf("//line %s:%d\n%s\n", s.file, s.line, s.code)
	}
	body := fmt.Sprintf("\n//line %s:%d\n%s\n", s.file, s.line, s.code)
	switch {
	case strings.Contains(s.prelude, "/* snippet */"):
		b.WriteString(strings.Replace(s.prelude, "/* snippet */", body, 1))
		b.WriteString("\n")
	default:
		b.WriteString(s.prelude)
		b.WriteString("\nfunc _() {")
		b.WriteString(body)
		b.WriteString("\n\t/* uses */\n}\n")
	}
	src := b.String()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", src, 0)
	if err != nil {
		t.Errorf("%v (a block the test cannot parse: place it in Go with a <!-- snippet … --> comment, CONTRIBUTING.md)", err)
		return ""
	}
	used := map[string]bool{}
	var uses []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && id.Obj == nil && imports[id.Name] != "" {
				used[id.Name] = true
			}
		case *ast.FuncDecl:
			// The variables the wrapped block declares at its top level
			// are used, as the rest of a real program would.
			if n.Name.Name == "_" && n.Body != nil && strings.Contains(src, "/* uses */") {
				for _, st := range n.Body.List {
					var names []*ast.Ident
					switch st := st.(type) {
					case *ast.AssignStmt:
						if st.Tok == token.DEFINE {
							for _, e := range st.Lhs {
								if id, ok := e.(*ast.Ident); ok {
									names = append(names, id)
								}
							}
						}
					case *ast.DeclStmt:
						if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
							for _, sp := range g.Specs {
								names = append(names, sp.(*ast.ValueSpec).Names...)
							}
						}
					}
					for _, id := range names {
						if id.Name != "_" {
							uses = append(uses, "_ = "+id.Name)
						}
					}
				}
			}
		}
		return true
	})
	sort.Strings(uses)
	src = strings.Replace(src, "/* uses */", strings.Join(uses, "; "), 1)
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	var imp strings.Builder
	imp.WriteString("package snippet\n\nimport (\n")
	for _, n := range names {
		fmt.Fprintf(&imp, "\t%s %q\n", n, imports[n])
	}
	imp.WriteString(")\n")
	return strings.Replace(src, "package snippet\n", imp.String(), 1)
}

// Invariant: every Go snippet of the README, the guide and the adapters'
// and extensions' READMEs compiles against the repository's modules, or
// names the Example test it is the body of (which must exist). One go
// build, in the workspace, compiles them all, each as a package of its
// own overlaid on this module.
func TestSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	snippets := readSnippets(t, root)
	if len(snippets) < 20 {
		t.Fatalf("%d Go snippets found, want the documentation's (20 or more)", len(snippets))
	}
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	here, _ := os.Getwd()
	for i, s := range snippets {
		if s.example != "" {
			if !hasExample(t, filepath.Join(root, s.exampleDir), s.example) {
				t.Errorf("%s:%d: marked as %s in %s, which has no such Example", s.file, s.line, s.example, s.exampleDir)
			}
			continue
		}
		src := s.source(t)
		if src == "" {
			continue
		}
		dir := "s" + strconv.Itoa(i)
		file := filepath.Join(tmp, dir+".go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(here, "snippets", dir, "snippet.go")] = file
		pkgs = append(pkgs, "./snippets/"+dir)
	}
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	// -gcflags=-e: every error of every snippet, not the first ten.
	cmd := exec.Command("go", append([]string{"build", "-overlay", ovFile, "-gcflags=-e"}, pkgs...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("a documentation snippet does not compile (%v):\n%s\n"+
			"Fix the snippet, or declare what it uses but does not show in a <!-- snippet … --> comment above it; "+
			"a package it names goes in this test's imports table (CONTRIBUTING.md, \"Documentation snippets\").", err, out.String())
	}
	t.Logf("%d snippets compiled, %d shown by Example tests", len(pkgs), len(snippets)-len(pkgs))
}

// hasExample reports whether a test file in dir declares func name.
func hasExample(t *testing.T, dir, name string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("\nfunc "+name+"() {")) {
			return true
		}
	}
	return false
}
