package execd

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLinesCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"one line", []string{"hello\n"}, []string{"hello"}},
		{"no end", []string{"hello"}, []string{"hello"}},
		{"crlf", []string{"a\r\nb\r\n"}, []string{"a", "b"}},
		{"crlf split across writes", []string{"a\r", "\nb\n"}, []string{"a", "b"}},
		{"lone cr", []string{"10%\r20%\rdone\n"}, []string{"10%", "20%", "done"}},
		{"blank line", []string{"a\n\nb\n"}, []string{"a", "", "b"}},
		{"line across writes", []string{"he", "llo\nwor", "ld"}, []string{"hello", "world"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			l := &lines{emit: func(s string) { got = append(got, s) }}
			for _, w := range tt.writes {
				l.Write([]byte(w))
			}
			l.flush()
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLinesPython(t *testing.T) {
	t.Parallel()
	var got []string
	l := &lines{keep: true, emit: func(s string) { got = append(got, s) }}
	l.Write([]byte("a\nb"))
	l.Write([]byte("c\r\n\n"))
	l.Write([]byte("tail"))
	l.flush()
	want := []string{"a\n", "bc\r\n", "\n", "tail"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLinesLongLineIsCut(t *testing.T) {
	t.Parallel()
	var got []string
	l := &lines{emit: func(s string) { got = append(got, s) }}
	long := strings.Repeat("é", maxLine) // 2 bytes each: cuts must fall between runes
	l.Write([]byte(long + "\n"))
	if strings.Join(got, "") != long {
		t.Fatalf("pieces do not add up to the line")
	}
	for _, p := range got {
		if len(p) > maxLine || !strings.HasPrefix(p, "é") {
			t.Errorf("piece of %d bytes starting %q", len(p), p[:2])
		}
	}
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h        string
		size     int64
		start, n int64
		ok       bool
	}{
		{"bytes=0-9", 100, 0, 10, true},
		{"bytes=90-", 100, 90, 10, true},
		{"bytes=90-200", 100, 90, 10, true},
		{"bytes=-10", 100, 90, 10, true},
		{"bytes=-500", 100, 0, 100, true},
		{"bytes=100-", 100, 0, 0, false},
		{"bytes=5-4", 100, 0, 0, false},
		{"bytes=0-1,5-6", 100, 0, 0, false},
		{"bytes=abc", 100, 0, 0, false},
		{"lines=0-1", 100, 0, 0, false},
		{"bytes=-0", 100, 0, 0, false},
		{"bytes=0-", 0, 0, 0, false},
	}
	for _, tt := range tests {
		s, n, ok := parseRange(tt.h, tt.size)
		if ok != tt.ok || (ok && (s != tt.start || n != tt.n)) {
			t.Errorf("parseRange(%q, %d) = %d, %d, %v; want %d, %d, %v", tt.h, tt.size, s, n, ok, tt.start, tt.n, tt.ok)
		}
	}
}

func TestModeDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode   fs.FileMode
		digits int
	}{
		{0o644, 644},
		{0o755, 755},
		{0o600, 600},
		{0o7, 7},
		{0o755 | fs.ModeSetuid, 4755},
		{0o777 | fs.ModeSticky, 1777},
	}
	for _, tt := range tests {
		if got := modeDigits(tt.mode); got != tt.digits {
			t.Errorf("modeDigits(%o) = %d, want %d", tt.mode, got, tt.digits)
		}
		back, err := parseMode(tt.digits)
		if err != nil || back != tt.mode {
			t.Errorf("parseMode(%d) = %v, %v; want %v", tt.digits, back, err, tt.mode)
		}
	}
	for _, bad := range []int{8, 999, 648, -1, 17777} {
		if _, err := parseMode(bad); err == nil {
			t.Errorf("parseMode(%d): no error", bad)
		}
	}
}

// TestStreamWireBytes pins the exact bytes of a stream: JSON objects each
// ended by a blank line, every one with its timestamp, no HTML escaping.
func TestStreamWireBytes(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1700000000123)
	h := newHandler(nil, Options{Now: func() time.Time { return now }, PingInterval: time.Hour})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/execd/x/command", nil)
	s := h.startStream(&call{w: rec, r: req})
	s.send(event{Type: evInit, Text: text("cmd1")})
	s.send(event{Type: evStdout, Text: text("<a & b>")})
	s.send(event{Type: evStdout, Text: text("")})
	s.send(event{Type: evResult, Results: results(map[string]string{"text/plain": "42"})})
	s.send(event{Type: evCount, ExecutionCount: 3})
	s.send(event{Type: evError, Error: &eventError{Name: "CommandExecError", Value: "3", Traceback: []string{"exit status 3"}}})
	s.send(event{Type: evComplete, ExecutionTime: millis(0)})
	s.close()
	want := `{"type":"init","text":"cmd1","timestamp":1700000000123}

{"type":"stdout","text":"<a & b>","timestamp":1700000000123}

{"type":"stdout","text":"","timestamp":1700000000123}

{"type":"result","timestamp":1700000000123,"results":{"text":"42"}}

{"type":"execution_count","execution_count":3,"timestamp":1700000000123}

{"type":"error","timestamp":1700000000123,"error":{"ename":"CommandExecError","evalue":"3","traceback":["exit status 3"]}}

{"type":"execution_complete","execution_time":0,"timestamp":1700000000123}

`
	if got := rec.Body.String(); got != want {
		t.Errorf("wire bytes:\n%s\nwant:\n%s", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestStreamPings: a stream pings while its work runs.
func TestStreamPings(t *testing.T) {
	t.Parallel()
	h := newHandler(nil, Options{PingInterval: time.Millisecond})
	rec := httptest.NewRecorder()
	s := h.startStream(&call{w: rec, r: httptest.NewRequest(http.MethodPost, "/execd/x/code", nil)})
	time.Sleep(50 * time.Millisecond)
	s.close()
	body := rec.Body.String()
	if !strings.Contains(body, `{"type":"ping","text":"pong","timestamp":`) {
		t.Errorf("no ping in %q", body)
	}
}
