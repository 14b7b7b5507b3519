package kernel

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeStreamAgreesWithJSON checks the fast path against
// encoding/json on stream frames with every kind of escape.
func TestDecodeStreamAgreesWithJSON(t *testing.T) {
	texts := []string{
		"", "hello\n", `quote " backslash \ slash /`, "tab\tcr\rnl\nbs\bff\f", "\x00\x01\x1f",
		"ünïcödé ✓ 🔑", "\u2028\u2029", strings.Repeat("x", 1<<16), "<script>&amp;</script>",
	}
	for _, text := range texts {
		// In the init's key order (encoding/json would sort map keys).
		line := []byte(`{"type":"stream","id":"call-1","name":"stdout","text":` + string(mustJSON(t, text)) + `}`)
		fast, ok := decodeStream(line)
		if !ok {
			t.Fatalf("fast path refused %q", line[:min(len(line), 80)])
		}
		var slow frame
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatal(err)
		}
		slow.Event.Type, slow.Event.ID = EventType(slow.Type), slow.ID
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("text %q: fast %+v, encoding/json %+v", text, fast, slow)
		}
	}
	// Escapes Python's encoder writes that Go's does not.
	for raw, want := range map[string]string{
		`"\ud83d\udd11"`: "🔑",
		`"\ud83d"`:       "\ufffd",
		`"\u00e9\/"`:     "é/",
	} {
		f, ok := decodeStream([]byte(`{"type":"stream","id":"i","name":"stderr","text":` + raw + `}`))
		if !ok || f.Text != want {
			t.Errorf("%s: %q %v, want %q", raw, f.Text, ok, want)
		}
	}
	// Not the exact shape: left to encoding/json.
	for _, line := range []string{
		`{"type":"stream","name":"stdout","id":"i","text":"x"}`,
		`{"type":"stream","id":"i","name":"stdout","text":"x","extra":1}`,
		`{"type":"stream","id":"i","name":"stdout","text":"bad \q escape"}`,
		"{\"type\":\"stream\",\"id\":\"i\",\"name\":\"stdout\",\"text\":\"raw\ttab\"}",
		"{\"type\":\"stream\",\"id\":\"i\",\"name\":\"stdout\",\"text\":\"\xff\"}",
		`{"type":"stream","id":"i","name":"stdout","text":"unterminated}`,
	} {
		if _, ok := decodeStream([]byte(line)); ok {
			t.Errorf("fast path took %q", line)
		}
	}
}

func mustJSON(t *testing.T, s string) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeStream(f *testing.F) {
	f.Add(`{"type":"stream","id":"a","name":"stdout","text":"x\n"}`)
	f.Add(`{"type":"stream","id":"a","name":"stdout","text":"\ud83d\udd11\\"}`)
	f.Fuzz(func(t *testing.T, line string) {
		fast, ok := decodeStream([]byte(line))
		if !ok {
			return
		}
		var slow frame
		if err := json.Unmarshal([]byte(line), &slow); err != nil {
			t.Fatalf("fast path took what encoding/json refuses: %q: %v", line, err)
		}
		if fast.ID != slow.ID || fast.Name != slow.Name || fast.Text != slow.Text {
			t.Fatalf("%q: fast %+v, encoding/json %+v", line, fast, slow)
		}
	})
}

func BenchmarkDecodeStream(b *testing.B) {
	line := []byte(`{"type":"stream","id":"abc","name":"stdout","text":"` + strings.Repeat("x", 1<<20) + `"}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		decodeFrame(line)
	}
}
