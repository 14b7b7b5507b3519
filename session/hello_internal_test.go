package session

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestProcState(t *testing.T) {
	for _, c := range []struct {
		stat  string
		state byte
		ok    bool
	}{
		{"1 (python3) S 0 1 1 0 -1 4194560", 'S', true},
		{"1 (python3) T 0 1 1 0 -1 4194560", 'T', true},
		{"1 (a) b) (c) t 0 1", 't', true},
		{"1 (with space) R 0", 'R', true},
		{"1 (python3)", 0, false},
		{"1 (python3)S 0", 0, false},
		{"", 0, false},
		{"no parenthesis here", 0, false},
	} {
		state, ok := procState([]byte(c.stat))
		if state != c.state || ok != c.ok {
			t.Errorf("procState(%q) = %q, %v; want %q, %v", c.stat, state, ok, c.state, c.ok)
		}
	}
}

// runningDriver says every container runs.
type runningDriver struct{ Driver }

func (runningDriver) Inspect(context.Context, string) (Container, error) {
	return Container{Running: true}, nil
}

type textStream struct{ *strings.Reader }

func (textStream) Write(p []byte) (int, error) { return len(p), nil }
func (textStream) Close() error                { return nil }
func (textStream) CloseWrite() error           { return nil }
func (textStream) Stderr() string              { return "" }

// TestBadStreamQuotesText: a supervisor stream that carries text where
// frames belong (the engine's own words) is quoted in the error, up to its
// first line; binary garbage is not.
func TestBadStreamQuotesText(t *testing.T) {
	m := &Manager{drv: runningDriver{}}
	base := errors.New("the command's supervisor sent a frame of 1128865906 bytes")
	for _, c := range []struct {
		name, stream, want string
	}{
		{"engine text", "OCI runtime exec failed: exec failed: boom\r\nsecond line", `it began with "OCI runtime exec failed: exec failed: boom"`},
		{"binary", "\x00\x01\x02\x03\x04rest", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each looks at the container for two seconds
			head, rest := []byte(c.stream[:5]), c.stream[5:]
			err := m.badStream(context.Background(), "c0ffee", textStream{strings.NewReader(rest)}, head, base)
			if !errors.Is(err, base) {
				t.Fatalf("got %v, want it to wrap %v", err, base)
			}
			if c.want == "" && err != base {
				t.Fatalf("got %v, want %v alone", err, base)
			}
			if c.want != "" && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want it to say %s", err, c.want)
			}
		})
	}
}
