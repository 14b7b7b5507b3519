package server

import (
	"errors"
	"io"
	"net"
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
