package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// fakeConn is a connection from a given remote address.
type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeConn) RemoteAddr() net.Addr { return c.remote }

// feedListener accepts the connections sent on its channel.
type feedListener struct {
	net.Listener
	conns chan net.Conn
}

func (l feedListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, errors.New("closed")
	}
	return c, nil
}

// TestConnectionCapCountsAnIPv6Client: an IPv6 client owns at least a /64
// and can connect from any address in it; the cap per client address must
// count the /64, or one client takes every descriptor of the server with
// one address per connection.
func TestConnectionCapCountsAnIPv6Client(t *testing.T) {
	feed := make(chan net.Conn, 8)
	ln := limitPerClient(feedListener{conns: feed}, 2)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for i, ip := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3"} {
		a, b := net.Pipe()
		held = append(held, a)
		go io.Copy(io.Discard, a) // the refusal writes its 429
		feed <- fakeConn{Conn: b, remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000 + i}}
	}
	got := 0
	for got < 3 {
		select {
		case c := <-accepted:
			held = append(held, c)
			got++
		case <-time.After(500 * time.Millisecond):
			if got != 2 {
				t.Fatalf("three connections from one IPv6 /64 with a cap of 2: %d accepted", got)
			}
			return
		}
	}
	t.Fatalf("three connections from one IPv6 /64 with a cap of 2: all accepted")
}

// TestCountedConnKeepsTCPFastPaths: the cap's wrapper hides nothing
// net/http uses of a TCP connection: ReadFrom (sendfile, for artifact
// downloads and files) and CloseWrite (the half-close before closing a
// refused connection, so that its answer is not lost to a reset).
func TestCountedConnKeepsTCPFastPaths(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitPerClient(tcp, 4)
	defer ln.Close()
	client, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(io.ReaderFrom); !ok {
		t.Errorf("%T is no io.ReaderFrom: responses copied from files lose sendfile", c)
	}
	if _, ok := c.(interface{ CloseWrite() error }); !ok {
		t.Errorf("%T has no CloseWrite: net/http cannot half-close before closing a refused connection", c)
	}
}

// TestRefusalsOverTheCapAreBounded: a connection over the cap is answered
// 429 within a few seconds, holding its descriptor meanwhile; a client
// that opens connections faster than that must not make the server hold
// one descriptor per connection it opened in the last seconds (beating
// the cap with its own refusals): past a bound, the excess is closed at
// once.
func TestRefusalsOverTheCapAreBounded(t *testing.T) {
	feed := make(chan net.Conn, 256)
	ln := limitPerClient(feedListener{conns: feed}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	defer close(feed)
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}
	var clients []net.Conn
	for range 201 {
		a, b := net.Pipe()
		clients = append(clients, a)
		feed <- fakeConn{Conn: b, remote: remote}
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	// The clients send nothing: a refusal waits for their request.
	time.Sleep(300 * time.Millisecond)
	closed := 0
	for _, c := range clients[1:] {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if held := 200 - closed; held > maxRefusing {
		t.Fatalf("200 connections over the cap of one client: %d still held after 300 ms, want at most %d", held, maxRefusing)
	}
}

// TestDownloadsKeepSendfile: what a mounted API writes a file with reaches
// net/http's ReadFrom (sendfile), through the guard's writer and the
// tracing one: artifact downloads are served from disk at the speed the
// kernel copies them, as before the guard.
func TestDownloadsKeepSendfile(t *testing.T) {
	got := make(chan bool, 1)
	h := Handler(Mounts{Artifacts: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := w.(io.ReaderFrom)
		got <- ok
	})}, Policy{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/artifacts/a1?token=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !<-got {
		t.Fatal("the download handler's writer is no io.ReaderFrom: files are copied through user space")
	}
}
