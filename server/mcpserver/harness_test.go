package mcpserver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/server/mcpserver"
	"github.com/agentbox/agentbox/session"
)

// salesCSV is the dataset the test fetcher serves as "sales"; every other
// id is unknown to it.
const salesCSV = "region,amount\nnorth,10\nsouth,32\n"

// engineManager is a Manager on the real engine, in a namespace of its own,
// with both dataset sources: a read-only folder holding cities.csv at
// /data, and an API fetcher that knows "sales". Its containers go when the
// test ends.
func engineManager(t *testing.T) *session.Manager {
	t.Helper()
	cli := dockertest.Engine(t)
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SandboxImage = dockertest.Image(t)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.InterruptGrace = 2 * time.Second
	ro := filepath.Join(dir, "datasets")
	if err := os.MkdirAll(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "cities.csv"), []byte("city,pop\nOslo,700000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.DatasetAccess = config.AccessHybrid
	cfg.DatasetsHostRO = ro
	fetch := datasets.BytesFetcher(func(_ context.Context, req datasets.Request) ([]byte, error) {
		if req.ID == "sales" {
			return []byte(salesCSV), nil
		}
		return nil, fmt.Errorf("no dataset %q", req.ID)
	})
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "t-" + hex.EncodeToString(b[:])
	m, err := session.NewManager(context.Background(), cfg, session.WithNamespace(ns), session.WithFetcher(fetch),
		session.WithLabels(map[string]string{dockertest.LabelTest: t.Name()}))
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close manager: %v", err)
		}
		if err := dockertest.Sweep(ctx, cli, session.LabelNamespace+"="+ns); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	return m
}

// memoryClient connects a client to New's server over the SDK's in-memory
// transport.
func memoryClient(t *testing.T, m *session.Manager, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(m, opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// httpServer serves HTTPHandler on a loopback test server.
func httpServer(t *testing.T, m *session.Manager, opts mcpserver.Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mcpserver.HTTPHandler(m, opts))
	t.Cleanup(srv.Close)
	return srv
}

// headers is a RoundTripper that adds its headers to every request.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// httpConnect opens an MCP session on srv sending the API key (if any) and
// extra headers.
func httpConnect(ctx context.Context, srv *httptest.Server, key string, extra http.Header) (*mcp.ClientSession, error) {
	h := http.Header{}
	for k, v := range extra {
		h[k] = v
	}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	tr := &mcp.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: &http.Client{Transport: headers{h: h, next: srv.Client().Transport}},
		MaxRetries: -1,
	}
	return mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
}

func httpClient(t *testing.T, srv *httptest.Server, key string, extra http.Header) *mcp.ClientSession {
	t.Helper()
	cs, err := httpConnect(context.Background(), srv, key, extra)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// reply is a tool result as a test reads it.
type reply struct {
	text    string // the text contents, joined
	images  [][]byte
	mimes   []string
	isError bool
}

// call calls tool with args (a JSON object) and fails the test on a
// protocol error: every answer of these tools is a tool result.
func call(t *testing.T, cs *mcp.ClientSession, tool, args string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var a any = json.RawMessage(args)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
	if err != nil {
		t.Fatalf("%s %s: protocol error: %v", tool, args, err)
	}
	var r reply
	var texts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, c.Text)
		case *mcp.ImageContent:
			r.images = append(r.images, c.Data)
			r.mimes = append(r.mimes, c.MIMEType)
		default:
			t.Errorf("%s: unexpected content %T", tool, c)
		}
	}
	r.text = strings.Join(texts, "\n")
	r.isError = res.IsError
	return r
}

// want calls tool and checks the reply holds every substring of wants and
// that isError is as expected.
func want(t *testing.T, cs *mcp.ClientSession, tool, args string, isError bool, wants ...string) reply {
	t.Helper()
	r := call(t, cs, tool, args)
	if r.isError != isError {
		t.Errorf("%s %s: isError = %v, want %v; reply:\n%s", tool, args, r.isError, isError, r.text)
	}
	for _, w := range wants {
		if !strings.Contains(r.text, w) {
			t.Errorf("%s %s: reply lacks %q:\n%s", tool, args, w, r.text)
		}
	}
	return r
}

// statusOf posts an MCP initialize request with the given Authorization
// header ("" for none) and returns the HTTP status.
func statusOf(t *testing.T, srv *httptest.Server, authorization string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
