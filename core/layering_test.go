package resilience

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fileGraph type-checks this package's non-test files and returns, for
// each file, the other files whose names it uses (package-level names,
// methods and fields), with one such name per edge for the message.
func fileGraph(t *testing.T) map[string]map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("resilience", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	file := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	g := map[string]map[string]string{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		member := false
		switch o := obj.(type) {
		case *types.Func:
			member = o.Signature().Recv() != nil
		case *types.Var:
			member = o.IsField()
		}
		if obj.Parent() != pkg.Scope() && !member {
			continue // a local name
		}
		from, to := file(id.Pos()), file(obj.Pos())
		if from == to {
			continue
		}
		if g[from] == nil {
			g[from] = map[string]string{}
		}
		g[from][to] = obj.Name()
	}
	return g
}

// No arrow runs back up inside the root package: the files are layered,
// each using only names of the files below it, so that a file can be read
// knowing only what it builds on (docs/DESIGN.md lists them in that
// order). A file that uses a name of a file that, directly or through
// others, uses one of its own fails here, naming the names.
func TestRootFilesAreLayered(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	g := fileGraph(t)
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var order, path []string
	var visit func(f string)
	visit = func(f string) {
		state[f] = open
		path = append(path, f)
		deps := make([]string, 0, len(g[f]))
		for d := range g[f] {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		for _, d := range deps {
			switch state[d] {
			case open:
				cyc := append(slices.Clone(path[slices.Index(path, d):]), d)
				cycle := cyc[0]
				for j := 1; j < len(cyc); j++ {
					cycle += " → (" + g[cyc[j-1]][cyc[j]] + ") " + cyc[j]
				}
				t.Errorf("files use each other's names: %s", cycle)
			case unseen:
				visit(d)
			}
		}
		path = path[:len(path)-1]
		state[f] = done
		order = append(order, f)
	}
	var all []string
	ents, _ := os.ReadDir(".")
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			all = append(all, n)
		}
	}
	for _, f := range all {
		if state[f] == unseen {
			visit(f)
		}
	}
	t.Logf("the root package's files, each after those it uses: %s", strings.Join(order, " "))
}
