package kernel

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameReader(t *testing.T) {
	in := "\n{\"type\":\"a\"}\n  \n{\"type\":\"b\"}\n{\"type\":\"c\"}"
	fr := newFrameReader(strings.NewReader(in), 1024)
	for _, want := range []string{`{"type":"a"}`, `{"type":"b"}`} {
		got, err := fr.next()
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if _, err := fr.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("unterminated frame: %v", err)
	}
	long := newFrameReader(bytes.NewReader(append(bytes.Repeat([]byte("x"), 200<<10), '\n')), 100<<10)
	if _, err := long.next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("long frame: %v", err)
	}
}

func TestSkippable(t *testing.T) {
	for line, want := range map[string]bool{
		`{"type":"accepted","req":"1","id":"a","duplicate":false,"queued":0}`: true,
		`{"req":"1","type":"accepted","id":"a"}`:                              false, // decoded, then ignored
		`{"type":"started","id":"a","execution_count":1}`:                     false,
		`{"type":"result","id":"a"}`:                                          false,
		`{"type":"acceptedx"}`:                                                false,
	} {
		if got := skippable([]byte(line)); got != want {
			t.Errorf("skippable(%s) = %v, want %v", line, got, want)
		}
	}
}

// FuzzFrameDecoder feeds arbitrary bytes to the frame reader and decoder: they
// may reject input, never panic or return a frame without a type.
func FuzzFrameDecoder(f *testing.F) {
	f.Add([]byte(`{"type":"hello","protocol":1}` + "\n"))
	f.Add([]byte(`{"type":"stream","id":"a","name":"stdout","text":"\u00e9\ud800"}` + "\n"))
	f.Add([]byte(`{"type":"result","error":{"name":"E","traceback":["x"]},"truncated":{"stdout":5}}` + "\n"))
	f.Add([]byte("\xff\xfe\n{\n}\n"))
	f.Add([]byte(`{"type":"display","data":{"image/png":"iVBOR"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), 4096)
		for {
			line, err := fr.next()
			if err != nil {
				return
			}
			fr2, err := decodeFrame(line)
			if err == nil && fr2.Type == "" {
				t.Fatalf("decoded a frame without a type from %q", line)
			}
		}
	})
}
