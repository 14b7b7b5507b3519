package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Request bodies. There is no timeout on whole requests (streams last as
// long as their code runs), but a body must arrive: within BodyTimeout plus
// the time its bytes need at MinBodyRate. A client that trickles a body is
// cut off then instead of holding its connection, and its descriptor, for
// as long as it likes, before any API could even check its key.
const (
	DefaultBodyTimeout = 15 * time.Second
	MinBodyRate        = 64 << 10 // bytes per second
)

// deadlineBody moves the connection's read deadline as a body arrives, and
// lifts it once the body is read, so that a response streamed afterwards
// (an execution's events) is not cut.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	n     int64
	done  bool
}

func newDeadlineBody(w http.ResponseWriter, r *http.Request, grace time.Duration) *deadlineBody {
	b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), grace: grace}
	_ = b.rc.SetReadDeadline(b.start.Add(grace))
	return b
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF && !b.done:
		// Only the end lifts it: after an overdue body the server must
		// not wait for the rest.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case n > 0:
		_ = b.rc.SetReadDeadline(b.start.Add(b.grace + time.Duration(b.n)*time.Second/MinBodyRate))
	}
	return n, err
}

// closingWriter closes the connection after a refusal (401, 403, 413): a
// client turned away does not keep the connection, nor make the server
// read the rest of its body to reuse it.
type closingWriter struct{ http.ResponseWriter }

func (w closingWriter) WriteHeader(code int) {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge:
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w closingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// ReadFrom keeps net/http's sendfile for what a handler copies from a
// file (artifact downloads, files): without it, io.Copy sees no
// io.ReaderFrom through this writer and the tracing one above it.
func (w closingWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// Unwrap lets http.ResponseController reach the connection.
func (w closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maxRefusing bounds the connections over the cap being answered 429 at
// once: each holds its descriptor for up to three seconds, so a client
// that opens connections faster would otherwise take the descriptors the
// cap keeps for the others. Past it, a connection is closed unanswered.
const maxRefusing = 64

// perClient caps the connections one client address holds at once
// (SERVE_MAX_CONNS_PER_CLIENT): past the cap a connection is answered 429
// and closed, so one client cannot take every descriptor of the server.
type perClient struct {
	net.Listener
	max int
	// refusing counts the refusals under way (see maxRefusing).
	refusing atomic.Int32

	mu sync.Mutex
	n  map[string]int
}

func limitPerClient(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &perClient{Listener: ln, max: max, n: make(map[string]int)}
}

func (l *perClient) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientOf(c.RemoteAddr())
		l.mu.Lock()
		if l.n[addr] >= l.max {
			l.mu.Unlock()
			if l.refusing.Add(1) > maxRefusing {
				l.refusing.Add(-1)
				c.Close()
				continue
			}
			go func() {
				defer l.refusing.Add(-1)
				l.refuse(c)
			}()
			continue
		}
		l.n[addr]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: sync.OnceFunc(func() {
			l.mu.Lock()
			if l.n[addr]--; l.n[addr] <= 0 {
				delete(l.n, addr)
			}
			l.mu.Unlock()
		})}, nil
	}
}

// clientOf is the client a remote address counts for: an IPv4 address, or
// an IPv6 address's /64 (the least an IPv6 client is given: it can connect
// from any address in it, one connection each).
func clientOf(a net.Addr) string {
	addr := a.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// refuse answers a connection over the cap with a 429 and closes it,
// within a few seconds whatever the client does.
func (l *perClient) refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	// Read what the client sent first: closing with unread data resets the
	// connection, and the client would not see why.
	buf := make([]byte, 4096)
	_, _ = c.Read(buf)
	body := `{"code":"TOO_MANY_CONNECTIONS","message":"this client address holds ` + strconv.Itoa(l.max) +
		` connections already (SERVE_MAX_CONNS_PER_CLIENT); reuse them or close some"}` + "\n"
	fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
	}
}

type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// ReadFrom lets net/http copy a file into the connection with sendfile
// (artifact downloads, files), as it does on the bare TCP connection.
func (c *countedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite lets net/http half-close a connection it is about to close
// after an answer (a refusal whose body it did not read), so that the
// answer reaches the client before the reset.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
