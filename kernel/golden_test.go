package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// step is one request of a transcript with the frames the init answers.
type step struct {
	request map[string]any
	frames  []map[string]any
	want    map[string]any // the Result the client must return; nil if it must fail
}

type transcript struct {
	hello map[string]any
	steps []step
}

func loadTranscript(t *testing.T, path string) transcript {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tr transcript
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(line[2:]), &obj); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		switch line[0] {
		case '<':
			if tr.hello == nil {
				tr.hello = obj
			} else {
				s := &tr.steps[len(tr.steps)-1]
				s.frames = append(s.frames, obj)
			}
		case '>':
			tr.steps = append(tr.steps, step{request: obj})
		case '=':
			tr.steps[len(tr.steps)-1].want = obj
		}
	}
	return tr
}

// fill replaces the placeholders of a golden frame with concrete values.
func fill(v any, req string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fill(e, req)
			if e == "$any" {
				switch k {
				case "python":
					out[k] = "3.14.0"
				case "traceback":
					out[k] = []any{"Traceback (most recent call last):"}
				}
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fill(e, req)
		}
		return out
	case string:
		switch x {
		case "$req":
			return req
		case "$any":
			return 1
		}
	}
	return v
}

// matches reports whether got has every field of want ("$any" matches anything).
func matches(want, got any) bool {
	if s, ok := want.(string); ok && s == "$any" {
		return true
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !matches(wv, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !matches(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

// fakeInit plays the init's side of a transcript over conn.
func fakeInit(t *testing.T, conn net.Conn, tr transcript) {
	enc := json.NewEncoder(conn)
	if err := enc.Encode(fill(tr.hello, "")); err != nil {
		return
	}
	r := bufio.NewReader(conn)
	for _, s := range tr.steps {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var got map[string]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Errorf("client sent invalid JSON %q", line)
			return
		}
		if !matches(s.request, got) {
			t.Errorf("client sent %v, transcript expects %v", got, s.request)
			return
		}
		req, _ := got["req"].(string)
		for _, f := range s.frames {
			if err := enc.Encode(fill(f, req)); err != nil {
				return
			}
		}
	}
}

func TestGoldenTranscripts(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.jsonl")
	if len(paths) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr := loadTranscript(t, path)
			host, init := net.Pipe()
			go fakeInit(t, init, tr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := kernel.NewClient(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i, s := range tr.steps {
				var res any
				var err error
				id, _ := s.request["id"].(string)
				switch s.request["type"] {
				case "execute":
					code, ok := s.request["code"].(string)
					if !ok {
						continue // a malformed request the Go client cannot send
					}
					var r *kernel.Result
					r, err = c.Execute(ctx, kernel.ExecRequest{ID: id, Code: code}, nil)
					res = r
				case "get":
					var r *kernel.Result
					r, err = c.Fetch(ctx, id, nil)
					res = r
				case "inspect":
					var st *kernel.State
					st, err = c.Inspect(ctx)
					res = st
				default:
					continue
				}
				last := s.frames[len(s.frames)-1]
				if last["type"] == "error" {
					if err == nil {
						t.Fatalf("step %d: want an error for frame %v, got none", i, last)
					}
					if code := last["code"]; code == "unknown_execution" && !errors.Is(err, kernel.ErrUnknownExecution) ||
						code == "id_conflict" && !errors.Is(err, kernel.ErrIDConflict) {
						t.Fatalf("step %d: error %v does not match code %v", i, err, code)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if s.want == nil {
					continue
				}
				data, _ := json.Marshal(res)
				var got map[string]any
				_ = json.Unmarshal(data, &got)
				if !matches(s.want, got) {
					t.Fatalf("step %d: result\n got %s\nwant %v", i, data, s.want)
				}
			}
		})
	}
}
