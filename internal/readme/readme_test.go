package readme_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/server/native"
	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// block is one fenced code block of the README.
type block struct {
	lang string
	text string
	line int // the README line of the block's first line of code
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func readmeBlocks(t *testing.T, lang string) []block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []block
		cur  *block
		body strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: n + 1}
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = body.String()
			if cur.lang == lang {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if len(out) == 0 {
		t.Fatalf("the README has no %s block", lang)
	}
	return out
}

// snippetImports are the packages a README snippet may use without saying
// so, by the name it calls them.
var snippetImports = map[string]string{
	"artifacts": "github.com/agentbox/agentbox/artifacts",
	"datasets":  "github.com/agentbox/agentbox/datasets",
	"kernel":    "github.com/agentbox/agentbox/kernel",
	"tools":     "github.com/agentbox/agentbox/tools",
	"errors":    "errors",
	"fmt":       "fmt",
	"fs":        "io/fs",
	"io":        "io",
	"json":      "encoding/json",
	"log":       "log",
	"strings":   "strings",
	"time":      "time",
}

// snippetStubs declares the names the README's snippets take from an
// agent backend of the reader's own (a model's reply, a store).
const snippetStubs = `package snippets

import (
	"context"
	"encoding/json"
	"io"
)

var modelReply struct {
	ToolCalls []struct {
		ID, Name  string
		Arguments json.RawMessage
	}
}

var messages []any

func threadIDFrom(ctx context.Context) string { return "" }

func toolMessage(id, text string) any { return nil }

var myStore interface {
	Open(ctx context.Context, key, id string) (io.ReadCloser, error)
}
`

// wrapSnippet makes a README snippet a function of a package: the names
// the README says snippets leave out are its parameters, and every
// variable the snippet declares is used once at its end (a reader's
// program would go on to use them).
func wrapSnippet(t *testing.T, b block, n int) string {
	t.Helper()
	used := map[string]bool{}
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(b.text)), []byte(b.text), nil, 0)
	prev := ""
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev != "" {
			used[prev] = true
		}
		prev = ""
		if tok == token.IDENT {
			prev = lit
		}
	}
	imports := []string{`"context"`, `"os"`, `"github.com/agentbox/agentbox/config"`, `"github.com/agentbox/agentbox/session"`}
	for name, path := range snippetImports {
		if used[name] {
			imports = append(imports, fmt.Sprintf("%s %q", name, path))
		}
	}
	sort.Strings(imports)
	head := fmt.Sprintf("package snippets\n\nimport (\n\t%s\n)\n\n"+
		"func snippet%d(ctx context.Context, mgr *session.Manager, cfg config.Config, key string, f *os.File, code string) error {\n",
		strings.Join(imports, "\n\t"), n)
	body := fmt.Sprintf("//line README.md:%d\n%s", b.line, b.text)
	src := head + body + "\treturn nil\n}\n"
	file, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("README.md:%d: the Go snippet does not parse: %v", b.line, err)
		return ""
	}
	var uses []string
	seen := map[string]bool{}
	fn := file.Decls[len(file.Decls)-1].(*ast.FuncDecl)
	for _, st := range fn.Body.List {
		if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, e := range as.Lhs {
				if id, ok := e.(*ast.Ident); ok && id.Name != "_" && !seen[id.Name] {
					seen[id.Name] = true
					uses = append(uses, "\t_ = "+id.Name+"\n")
				}
			}
		}
	}
	return head + body + strings.Join(uses, "") + "\treturn nil\n}\n"
}

// TestGoExamples builds every Go block of the README against this tree: a
// whole program as it is, a snippet inside a function. A renamed call, a
// wrong argument or a missing import in the README fails here.
func TestGoExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's Go examples with the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on the PATH")
	}
	root := moduleRoot(t)
	dir := t.TempDir()
	overlay := map[string]string{}
	add := func(pkg, name, src string) {
		p := filepath.Join(dir, fmt.Sprintf("%d.go", len(overlay)))
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, "internal", "readme", "gen", pkg, name)] = p
	}
	pkgs := map[string]bool{}
	programs := 0
	for i, b := range readmeBlocks(t, "go") {
		if strings.HasPrefix(b.text, "package main") {
			programs++
			pkg := fmt.Sprintf("program%d", programs)
			add(pkg, "main.go", fmt.Sprintf("//line README.md:%d\n%s", b.line, b.text))
			pkgs[pkg] = true
			continue
		}
		if src := wrapSnippet(t, b, i); src != "" {
			add("snippets", fmt.Sprintf("snippet%d.go", i), src)
			pkgs["snippets"] = true
		}
	}
	if programs == 0 {
		t.Error("the README has no whole Go program (a block starting with package main) to copy")
	}
	add("snippets", "stubs.go", snippetStubs)
	ov, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	ovPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"build", "-overlay", ovPath}
	for pkg := range pkgs {
		args = append(args, "./internal/readme/gen/"+pkg)
	}
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go examples do not build (go %s): %v\n%s", strings.Join(args, " "), err, out)
	}
}

// curlWords splits a shell command line the way sh would for the simple
// words the README uses: single and double quotes, $NAME expanded inside
// double quotes and bare words from env.
func curlWords(line string, env map[string]string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is under way
	)
	expand := func(s string) string {
		return os.Expand(s, func(k string) string { return env[k] })
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unclosed \" in %q", line)
			}
			cur.WriteString(expand(line[i+1 : i+1+j]))
			i += j + 1
			in = true
		default:
			j := strings.IndexAny(line[i:], " \t'\"")
			if j < 0 {
				j = len(line) - i
			}
			cur.WriteString(expand(line[i : i+j]))
			i += j - 1
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestCurlExamples sends each curl command of the README, with its own
// headers and body, to the native API over a Manager on the in-memory
// driver, and wants it answered 2xx: a missing header or a wrong path in
// the README fails here.
func TestCurlExamples(t *testing.T) {
	const key = "readme-example-key-0123456789"
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.SessionDiskMB = 0
	ctx := context.Background()
	m, err := session.NewManager(ctx, cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	srv := httptest.NewServer(native.NewHandler(m, native.Options{Keys: tenant.NewKeys([]string{key})}))
	t.Cleanup(srv.Close)
	base, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	sent := 0
	for _, b := range readmeBlocks(t, "sh") {
		joined := strings.ReplaceAll(b.text, "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if !strings.HasPrefix(line, "curl ") {
				continue
			}
			sent++
			words, err := curlWords(line, map[string]string{"KEY": key})
			if err != nil {
				t.Errorf("README.md:%d: %v", b.line, err)
				continue
			}
			req, err := curlRequest(ctx, words, base)
			if err != nil {
				t.Errorf("README.md:%d: %v", b.line, err)
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			resp, err := http.DefaultClient.Do(req.WithContext(rctx))
			if err != nil {
				cancel()
				t.Errorf("README.md:%d: %v", b.line, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode/100 != 2 {
				t.Errorf("README.md:%d: %s %s answered %s: %s", b.line, req.Method, req.URL.Path, resp.Status, body)
			}
		}
	}
	if sent == 0 {
		t.Error("the README has no curl example (the native API's section shows one)")
	}
}

// curlRequest builds the request a curl command line would send, to base's
// host instead of the README's.
func curlRequest(ctx context.Context, words []string, base *url.URL) (*http.Request, error) {
	var (
		method, target string
		headers        []string
		data           *string
	)
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch w {
		case "-N", "-s", "-sS", "-S", "--no-buffer", "--silent":
		case "-H", "--header", "-d", "--data", "-X", "--request":
			if i+1 == len(words) {
				return nil, fmt.Errorf("curl: %s has no value", w)
			}
			i++
			switch w {
			case "-H", "--header":
				headers = append(headers, words[i])
			case "-d", "--data":
				v := words[i]
				data = &v
			default:
				method = words[i]
			}
		default:
			if strings.HasPrefix(w, "-") {
				return nil, fmt.Errorf("curl: the test does not know the option %s", w)
			}
			target = w
		}
	}
	if target == "" {
		return nil, fmt.Errorf("curl: no URL")
	}
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	u.Scheme, u.Host = base.Scheme, base.Host
	if method == "" {
		method = http.MethodGet
		if data != nil {
			method = http.MethodPost
		}
	}
	var body io.Reader
	if data != nil {
		body = strings.NewReader(*data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if data != nil {
		// What curl -d sends when the command sets no Content-Type.
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return nil, fmt.Errorf("curl: header %q has no colon", h)
		}
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return req, nil
}

// pythonUndefined lists, for a Python program on stdin, the names it reads
// that nothing in it defines or imports and that are not builtins.
const pythonUndefined = `
import ast, builtins, sys
src = sys.stdin.read()
tree = compile(src, "README", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
defined = set(dir(builtins))
for node in ast.walk(tree):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for a in node.names:
            defined.add((a.asname or a.name).split(".")[0])
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        defined.add(node.name)
    elif isinstance(node, ast.arg):
        defined.add(node.arg)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        defined.add(node.id)
missing = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in defined})
print(" ".join(missing))
`

var pythonLine = regexp.MustCompile(`\S`)

// TestPythonExamples parses every Python block of the README and wants
// each name it uses imported or defined in the block: a reader pastes it
// into a file and runs it. (The SDKs themselves cannot be installed here;
// the examples were run by hand against agentbox serve.)
func TestPythonExamples(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the PATH to parse the README's Python blocks")
	}
	for _, b := range readmeBlocks(t, "python") {
		if !pythonLine.MatchString(b.text) {
			continue
		}
		cmd := exec.Command(py, "-I", "-c", pythonUndefined)
		cmd.Stdin = strings.NewReader(b.text)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("README.md:%d: the Python block does not parse: %v\n%s", b.line, err, stderr.Bytes())
			continue
		}
		if missing := strings.TrimSpace(string(out)); missing != "" {
			t.Errorf("README.md:%d: the Python block uses names it never imports or defines: %s", b.line, missing)
		}
	}
}

// TestGoModuleRecipe follows the README's recipe for using the module from
// a module of one's own (go mod edit with a replace, go mod tidy) in an
// empty folder, with the README's whole program as its main.go, and builds
// it. The module proxy fills in what the cache lacks; without one the test
// skips.
func TestGoModuleRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy and a build")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on the PATH")
	}
	root := moduleRoot(t)
	var recipe []string
	for _, b := range readmeBlocks(t, "sh") {
		if strings.Contains(b.text, "go mod edit") {
			for _, line := range strings.Split(b.text, "\n") {
				if strings.HasPrefix(line, "go mod ") {
					recipe = append(recipe, line)
				}
			}
		}
	}
	if len(recipe) == 0 {
		t.Fatal("the README has no go mod recipe for using the module")
	}
	var program string
	for _, b := range readmeBlocks(t, "go") {
		if strings.HasPrefix(b.text, "package main") {
			program = b.text
			break
		}
	}
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	// The project's go.sum vouches for the modules both need; the checksum
	// database may be out of reach here.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = recipeEnv(os.Environ())
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		for _, unreachable := range []string{"dial tcp", "no such host", "module lookup disabled", "connection refused"} {
			if strings.Contains(string(out), unreachable) {
				t.Skipf("go %s needs the module proxy, out of reach: %s", strings.Join(args, " "), out)
			}
		}
		t.Fatalf("README recipe: go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	run("mod", "init", "example.com/app")
	for _, line := range recipe {
		args, err := recipeCommand(line, root)
		if err != nil {
			t.Fatalf("README recipe: %v", err)
		}
		run(args...)
	}
	run("build", "-o", os.DevNull, ".")
}

// recipeCommand is the go command's arguments for a line of the README's
// go mod recipe, with the clone (../agentbox) this tree. The test runs
// them, as root in CI, so only the recipe's own steps are taken: go mod
// edit requiring this module and replacing it by the clone, and go mod
// tidy. Anything else a README edit could write there (go mod vendor -o
// into any folder, go mod download, another module, a go or toolchain
// line) is refused, not run.
func recipeCommand(line, root string) ([]string, error) {
	const module = "github.com/agentbox/agentbox"
	words := strings.Fields(line)
	if len(words) < 3 || words[0] != "go" || words[1] != "mod" {
		return nil, fmt.Errorf("%q: want go mod edit or go mod tidy", line)
	}
	switch words[2] {
	case "tidy":
		if len(words) == 3 {
			return words[1:], nil
		}
	case "edit":
		args := []string{"mod", "edit"}
		for _, w := range words[3:] {
			switch {
			case strings.HasPrefix(w, "-require="+module+"@v"):
				args = append(args, w)
			case w == "-replace="+module+"=../agentbox":
				args = append(args, "-replace="+module+"="+root)
			default:
				return nil, fmt.Errorf("%q: %s is not a step of the recipe (want -require= or -replace= of %s, the clone ../agentbox)", line, w, module)
			}
		}
		if len(args) > 2 {
			return args, nil
		}
	}
	return nil, fmt.Errorf("%q: want go mod edit (-require=, -replace= of %s) or go mod tidy, nothing else", line, module)
}

// recipeEnv is the environment the recipe's go commands run with: the
// module proxy may fill the cache, unchecked by a checksum database
// (which may be out of reach; the project's go.sum vouches for what both
// need), but no toolchain is fetched and run, whatever the environment or
// the module asks.
func recipeEnv(base []string) []string {
	return append(base, "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
}
