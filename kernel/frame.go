package kernel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// frameReader reads newline-terminated JSON frames.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next non-empty frame's bytes, valid until the next call.
func (f *frameReader) next() ([]byte, error) {
	for {
		f.buf = f.buf[:0]
		for {
			chunk, err := f.r.ReadSlice('\n')
			if len(f.buf)+len(chunk) > f.max {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, f.max)
			}
			f.buf = append(f.buf, chunk...)
			if err == nil {
				break
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF && len(f.buf) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line := bytes.TrimSpace(f.buf)
		if len(line) > 0 {
			return line, nil
		}
	}
}

// payload reads the n raw bytes that follow a tool frame.
func (f *frameReader) payload(n int) ([]byte, error) {
	p := make([]byte, n)
	if _, err := io.ReadFull(f.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return p, nil
}

// acceptedPrefix starts every accepted frame the init writes (its encoder
// keeps the order of the keys, and "type" comes first).
var acceptedPrefix = []byte(`{"type":"accepted",`)

// skippable reports whether a frame can be dropped without decoding it: the
// client acts on no accepted frame, and decoding JSON is most of what it does
// per execution. A frame with its keys in another order is decoded, and then
// ignored.
func skippable(line []byte) bool {
	return bytes.HasPrefix(line, acceptedPrefix)
}

// decodeFrame parses one frame.
func decodeFrame(line []byte) (frame, error) {
	if fr, ok := decodeStream(line); ok {
		return fr, nil
	}
	var fr frame
	if err := json.Unmarshal(line, &fr); err != nil {
		return frame{}, fmt.Errorf("%w: bad frame %.80q: %v", ErrProtocol, line, err)
	}
	if fr.Type == "" {
		return frame{}, fmt.Errorf("%w: frame without a type: %.80q", ErrProtocol, line)
	}
	fr.Event.Type = EventType(fr.Type)
	fr.Event.ID = fr.ID
	return fr, nil
}

// encodeRequest renders one request frame.
func encodeRequest(r request) ([]byte, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func unmarshal(line []byte, v any) error {
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}
