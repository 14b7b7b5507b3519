package apicheck

import (
	"bufio"
	"bytes"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// public are the packages an embedder imports.
var public = []string{
	"config", "kernel", "session", "session/sessiontest", "artifacts", "datasets", "tools",
}

const module = "github.com/agentbox/agentbox/"

// TestPublicAPINamesOnlyExportedTypes fails for an exported signature,
// field or variable of a public package that names an unexported type (go
// doc shows a name a reader cannot look up) or a type of an internal
// package (a name an embedder cannot import).
func TestPublicAPINamesOnlyExportedTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds export data of the public packages")
	}
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}={{.Dir}}"}
	for _, p := range public {
		args = append(args, module+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, rest, _ := strings.Cut(sc.Text(), "=")
		file, dir, _ := strings.Cut(rest, "=")
		if file != "" {
			exports[path] = file
		}
		if strings.HasPrefix(path, module) {
			statSources(t, dir)
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	for _, p := range public {
		pkg, err := imp.Import(module + p)
		if err != nil {
			t.Fatalf("import %s: %v", p, err)
		}
		for _, problem := range check(pkg) {
			t.Errorf("%s.%s", p, problem)
		}
	}
}

// statSources looks at the Go files in dir, so that go test's cache, which
// knows files the test looked at but not what go list read, runs the test
// again when one changes.
func statSources(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			os.Stat(filepath.Join(dir, e.Name()))
		}
	}
}

// check lists the exported names of pkg whose types name an unexported or
// internal type.
func check(pkg *types.Package) []string {
	var problems []string
	seen := map[types.Type]bool{}
	var walk func(where string, t types.Type)
	walk = func(where string, t types.Type) {
		switch t := t.(type) {
		case *types.Named:
			o := t.Obj()
			if o.Pkg() != nil && !o.Exported() {
				problems = append(problems, where+": unexported type "+o.Pkg().Name()+"."+o.Name())
			} else if o.Pkg() != nil && strings.Contains(o.Pkg().Path()+"/", "/internal/") {
				problems = append(problems, where+": internal type "+o.Pkg().Path()+"."+o.Name())
			}
			for i := range t.TypeArgs().Len() {
				walk(where, t.TypeArgs().At(i))
			}
		case *types.Pointer:
			walk(where, t.Elem())
		case *types.Slice:
			walk(where, t.Elem())
		case *types.Array:
			walk(where, t.Elem())
		case *types.Map:
			walk(where, t.Key())
			walk(where, t.Elem())
		case *types.Chan:
			walk(where, t.Elem())
		case *types.Signature:
			for i := range t.Params().Len() {
				walk(where, t.Params().At(i).Type())
			}
			for i := range t.Results().Len() {
				walk(where, t.Results().At(i).Type())
			}
		case *types.Struct:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumFields() {
				if f := t.Field(i); f.Exported() {
					walk(where+"."+f.Name(), f.Type())
				}
			}
		case *types.Interface:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumExplicitMethods() {
				if m := t.ExplicitMethod(i); m.Exported() {
					walk(where+"."+m.Name(), m.Type())
				}
			}
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		if tn, ok := obj.(*types.TypeName); ok {
			named, ok := tn.Type().(*types.Named)
			if !ok {
				walk(name, tn.Type().Underlying())
				continue
			}
			walk(name, named.Underlying())
			for i := range named.NumMethods() {
				if m := named.Method(i); m.Exported() {
					walk(name+"."+m.Name(), m.Type())
				}
			}
			continue
		}
		walk(name, obj.Type())
	}
	return problems
}
