package session

import (
	"strings"
	"testing"
)

// TestLogRing: offsets stay true as the middle of the log is dropped, a
// cursor in the dropped part reports what it skipped, and the kept bytes
// stay within head + tail (+ one chunk).
func TestLogRing(t *testing.T) {
	r := logRing{head: 10, tail: 10}
	var all strings.Builder
	for i := 0; i < 100; i++ {
		s := string(rune('a'+i%26)) + "12"
		r.write("stdout", []byte(s))
		all.WriteString(s)
	}
	kept := 0
	for _, c := range r.chunks {
		kept += len(c.data)
	}
	if kept > 10+10+3+3 {
		t.Fatalf("kept %d bytes", kept)
	}
	whole := all.String()
	l := r.from(0)
	if l.Next != 300 || l.Skipped == 0 {
		t.Fatalf("from 0: next %d skipped %d", l.Next, l.Skipped)
	}
	got := ""
	for _, c := range l.Chunks {
		got += c.Data
	}
	if !strings.HasPrefix(whole, got[:12]) || !strings.HasSuffix(whole, got[len(got)-10:]) || int64(len(got))+l.Skipped != 300 {
		t.Fatalf("from 0: %q skipped %d", got, l.Skipped)
	}
	l = r.from(295)
	if l.Skipped != 0 || len(l.Chunks) != 2 || l.Chunks[0].Data+l.Chunks[1].Data != whole[295:] {
		t.Fatalf("from 295: %+v", l)
	}
	if l := r.from(300); len(l.Chunks) != 0 || l.Next != 300 {
		t.Fatalf("from the end: %+v", l)
	}
	if l := r.from(150); l.Skipped == 0 || l.Chunks[len(l.Chunks)-1].Data != whole[297:] {
		t.Fatalf("from the middle: %+v", l)
	}
}

// TestHeadTail keeps the head and tail and counts the cut.
func TestHeadTail(t *testing.T) {
	h := headTail{name: "stdout", head: 4, tail: 4}
	for _, s := range []string{"ab", "cdef", "ghij", "kl"} {
		h.write([]byte(s))
	}
	if h.cut != 4 || h.String() != "abcd\n[agentbox: 4 bytes of stdout cut here; the cap is 8 bytes]\nijkl" {
		t.Fatalf("cut %d: %q", h.cut, h.String())
	}
	short := headTail{name: "stdout", head: 4, tail: 4}
	short.write([]byte("abcdef"))
	if short.String() != "abcdef" {
		t.Fatalf("%q", short.String())
	}
}

// TestCommandCheck names what is wrong with a command.
func TestCommandCheck(t *testing.T) {
	ok := Command{Line: "echo hi", Cwd: "/tmp", Env: map[string]string{"A_1": "x y", "_B": ""}}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	long := Command{Line: strings.Repeat("x", MaxCommandLine+1)}
	if err := long.check(); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("long line: %v", err)
	}
}
