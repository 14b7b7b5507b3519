package native

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// documented returns "METHOD path" for every operation of the document's
// paths section, and the names its components define, by reading the
// layout openapi.yaml keeps (two spaces per level).
func documented(t *testing.T, doc []byte) (ops []string, components map[string]bool, refs []string) {
	t.Helper()
	pathRe := regexp.MustCompile(`^  (/\S*):$`)
	methodRe := regexp.MustCompile(`^    (get|put|post|delete|patch|head|options):$`)
	compRe := regexp.MustCompile(`^    ([A-Za-z]+):$`)
	refRe := regexp.MustCompile(`\$ref: "(#/components/[a-zA-Z]+/[A-Za-z]+)"`)
	components = map[string]bool{}
	section, sub, path := "", "", ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "\t") {
			t.Fatalf("tab in openapi.yaml: %q", line)
		}
		if line != "" && line[0] != ' ' {
			section = strings.TrimSuffix(line, ":")
			continue
		}
		if m := refRe.FindStringSubmatch(line); m != nil {
			refs = append(refs, m[1])
		}
		switch section {
		case "paths":
			if m := pathRe.FindStringSubmatch(line); m != nil {
				path = m[1]
			} else if m := methodRe.FindStringSubmatch(line); m != nil {
				ops = append(ops, strings.ToUpper(m[1])+" "+path)
			}
		case "components":
			if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
				sub = strings.TrimSuffix(strings.TrimSpace(line), ":")
			} else if m := compRe.FindStringSubmatch(line); m != nil {
				components["#/components/"+sub+"/"+m[1]] = true
			}
		}
	}
	return ops, components, refs
}

// TestOpenAPIMatchesRoutes: every route the handler serves is in the
// document, and the document describes no route the handler lacks.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ops, components, refs := documented(t, openAPI)
	var served []string
	for _, rt := range (&handler{}).routes() {
		served = append(served, rt.pattern)
	}
	slices.Sort(ops)
	slices.Sort(served)
	if len(ops) == 0 {
		t.Fatal("no operations read from openapi.yaml")
	}
	if !slices.Equal(ops, served) {
		t.Fatalf("openapi.yaml documents\n  %s\nthe handler serves\n  %s", strings.Join(ops, "\n  "), strings.Join(served, "\n  "))
	}
	for _, ref := range refs {
		if !components[ref] {
			t.Errorf("openapi.yaml refers to %s, which it does not define", ref)
		}
	}
	if !bytes.HasPrefix(openAPI, []byte("openapi: 3.")) {
		t.Error("openapi.yaml is not an OpenAPI 3 document")
	}
}

func TestOpenAPIServed(t *testing.T) {
	srv := httptest.NewServer(NewHandler(nil, Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/agentbox/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(b.Bytes(), openAPI) || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET openapi.yaml: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), b.Len())
	}
}
