package docker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
)

// Stream is a byte stream to a process started with `docker exec -i`: writes
// go to its standard input, reads come from its standard output. What it writes
// to standard error is kept (the first 64 KiB) for error messages.
type Stream struct {
	conn   net.Conn
	r      *bufio.Reader
	left   int // bytes left in the current stdout frame
	mu     sync.Mutex
	stderr limitedBuffer
	close  func()
}

// Exec starts cmd in the running container id as user (empty: the image's)
// and returns a stream joined to its standard input and output.
func (c *Client) Exec(ctx context.Context, id string, user string, cmd []string) (*Stream, error) {
	created, err := c.api.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         user,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          cmd,
	})
	if err != nil {
		return nil, fmt.Errorf("exec in container %s: %w", short(id), c.classify(err))
	}
	resp, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach to exec in container %s: %w", short(id), c.classify(err))
	}
	s := &Stream{conn: resp.Conn, r: resp.Reader, close: resp.Close}
	s.stderr.max = 64 << 10
	return s, nil
}

// Read reads the process's standard output, demultiplexing the engine's
// framing in place (no goroutine, no copy through a pipe: this is the hot
// path of every execution).
func (s *Stream) Read(p []byte) (int, error) {
	for s.left == 0 {
		var hdr [8]byte
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, err
		}
		n := int(binary.BigEndian.Uint32(hdr[4:]))
		switch hdr[0] {
		case 1:
			s.left = n
		default: // 2 = stderr; 0 = stdin never comes back
			buf := make([]byte, n)
			if _, err := io.ReadFull(s.r, buf); err != nil {
				return 0, io.EOF
			}
			s.mu.Lock()
			s.stderr.Write(buf)
			s.mu.Unlock()
		}
	}
	if len(p) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= n
	return n, err
}

// Write writes to the process's standard input.
func (s *Stream) Write(p []byte) (int, error) { return s.conn.Write(p) }

// SetWriteDeadline bounds the writes to come: a process that stops reading
// must not hold its writer forever once the pipes fill.
func (s *Stream) SetWriteDeadline(t time.Time) error { return s.conn.SetWriteDeadline(t) }

// CloseWrite closes the process's standard input.
func (s *Stream) CloseWrite() error {
	if cw, ok := s.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close ends the stream; the process sees end of input and the engine reaps it.
func (s *Stream) Close() error {
	s.close()
	return nil
}

// Stderr returns what the process wrote to its standard error so far.
func (s *Stream) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}
