// Package examples_test checks what every example server has in common.
package examples_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// serverTimeouts are the fields every server the examples and the docs
// show must set, so that idle or slow clients cannot hold connections and
// goroutines: IdleTimeout closes keep-alive connections left idle,
// ReadTimeout bounds reading a request (fasthttp's IdleTimeout falls back
// to it).
var serverTimeouts = []string{"ReadTimeout", "IdleTimeout"}

// noReadTimeout is how a server that must not bound reading a request
// (one serving long client streams) says so, in a comment just before or
// inside its literal; it still needs IdleTimeout.
const noReadTimeout = "No ReadTimeout:"

// serverType reports whether a composite literal's type is a server
// configuration: net/http's Server or fiber's Config.
func serverType(e ast.Expr) (string, bool) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", false
	}
	name := pkg.Name + "." + sel.Sel.Name
	return name, name == "http.Server" || name == "fiber.Config"
}

// Every http.Server and fiber.Config an example builds sets ReadTimeout
// and IdleTimeout, and no example calls fiber.New without a Config.
func TestExampleServersCloseIdleConnections(t *testing.T) {
	found := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		// explained reports whether a comment from the line before n to its
		// end says why it has no ReadTimeout.
		explained := func(n ast.Node) bool {
			from, to := fset.Position(n.Pos()).Line-1, fset.Position(n.End()).Line
			for _, cg := range f.Comments {
				if l := fset.Position(cg.End()).Line; l >= from && l <= to && strings.Contains(cg.Text(), noReadTimeout) {
					return true
				}
			}
			return false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				name, ok := serverType(n.Type)
				if !ok {
					return true
				}
				found++
				set := map[string]bool{}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok {
							set[k.Name] = true
						}
					}
				}
				for _, field := range serverTimeouts {
					if !set[field] && !(field == "ReadTimeout" && explained(n)) {
						t.Errorf("%s: %s{…} without %s (or a %q comment saying why)", fset.Position(n.Pos()), name, field, noReadTimeout)
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) == 0 {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fiber" && sel.Sel.Name == "New" {
						t.Errorf("%s: fiber.New() without a Config setting %v", fset.Position(n.Pos()), serverTimeouts)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 8 {
		t.Fatalf("found %d server literals under examples/, fewer than the examples have: is the walk looking in the right place?", found)
	}
}

var (
	codeBlock   = regexp.MustCompile("(?s)```go\n(.*?)```")
	serverStart = regexp.MustCompile(`http\.Server\{|fiber\.Config\{|fiber\.New\(\)`)
)

// The Go snippets of the README, the guide and the adapters' READMEs set
// the same timeouts wherever they build a server.
func TestDocSnippetServersCloseIdleConnections(t *testing.T) {
	if _, err := os.Stat("../README.md"); err != nil {
		t.Skip("the module is not inside the repository: no docs to read")
	}
	docs := []string{"../README.md"}
	for _, pattern := range []string{"../docs/*.md", "../adapters/*/README.md", "*/README.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m...)
	}
	found := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range codeBlock.FindAllStringSubmatch(string(b), -1) {
			code := block[1]
			for _, loc := range serverStart.FindAllStringIndex(code, -1) {
				found++
				lit := code[loc[0]:loc[1]]
				if lit == "fiber.New()" {
					t.Errorf("%s: fiber.New() without a Config setting %v", doc, serverTimeouts)
					continue
				}
				body := braced(code[loc[1]-1:])
				lines := strings.Split(code[:loc[0]], "\n")
				before := strings.Join(lines[max(0, len(lines)-2):], "\n") // the literal's line and the one before
				for _, field := range serverTimeouts {
					if !strings.Contains(body, field+":") && !(field == "ReadTimeout" && strings.Contains(before+body, noReadTimeout)) {
						t.Errorf("%s: %s…} without %s (or a %q comment saying why):\n%s", doc, lit, field, noReadTimeout, body)
					}
				}
			}
		}
	}
	if found < 5 {
		t.Fatalf("found %d server snippets in %v, fewer than the docs have", found, docs)
	}
}

// braced returns s up to the brace that closes its first one.
func braced(s string) string {
	depth := 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[:i+1]
			}
		}
	}
	return s
}
