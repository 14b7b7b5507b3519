package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
)

// scripted is a fake init: it sends hello, then answers each request with
// whatever reply returns (nil: no answer).
func scripted(t *testing.T, hello string, reply func(req map[string]any) []string) *kernel.Client {
	t.Helper()
	host, init := net.Pipe()
	go func() {
		defer init.Close()
		if _, err := init.Write([]byte(hello + "\n")); err != nil {
			return
		}
		r := bufio.NewReader(init)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var req map[string]any
			if json.Unmarshal(line, &req) != nil {
				return
			}
			for _, f := range reply(req) {
				if f == "CLOSE" {
					return
				}
				if _, err := init.Write([]byte(f + "\n")); err != nil {
					return
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := kernel.NewClient(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const hello = `{"type":"hello","protocol":4,"python":"3.14.0"}`

func TestVersionMismatchSaysRebuild(t *testing.T) {
	host, init := net.Pipe()
	go init.Write([]byte(`{"type":"hello","protocol":99}` + "\n"))
	_, err := kernel.NewClient(context.Background(), host)
	var verr *kernel.VersionError
	if !errors.As(err, &verr) || !errors.Is(err, kernel.ErrProtocolMismatch) || verr.Got != 99 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "sandbox-setup") {
		t.Fatalf("error does not say how to fix it: %v", err)
	}
}

func TestBadHello(t *testing.T) {
	cases := map[string]struct {
		send string
		want error
	}{
		"not json":     {"garbage\n", kernel.ErrProtocol},
		"not a hello":  {`{"type":"result"}` + "\n", kernel.ErrProtocol},
		"closed early": {"", kernel.ErrConnectionLost},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host, init := net.Pipe()
			go func() {
				init.Write([]byte(tc.send))
				init.Close()
			}()
			_, err := kernel.NewClient(context.Background(), host)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestHelloTimeout(t *testing.T) {
	host, _ := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := kernel.NewClient(ctx, host); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestCancellationInterruptsAndReturnsResult(t *testing.T) {
	interrupted := make(chan struct{})
	c := scripted(t, hello, func(req map[string]any) []string {
		switch req["type"] {
		case "execute":
			return []string{`{"type":"started","id":"a","execution_count":1}`, `{"type":"stream","id":"a","name":"stdout","text":"working\n"}`}
		case "interrupt":
			close(interrupted)
			return []string{`{"type":"result","id":"a","execution_count":1,"status":"error","error":{"name":"KeyboardInterrupt","value":"","traceback":[]},"interrupted":true}`}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := c.Execute(ctx, kernel.ExecRequest{ID: "a", Code: "while True: pass"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-interrupted
	if !res.TimedOut || res.Error.Name != "KeyboardInterrupt" || res.Stdout != "working\n" {
		t.Fatalf("%+v", res)
	}
}

func TestConnectionLostMidExecution(t *testing.T) {
	c := scripted(t, hello, func(req map[string]any) []string {
		return []string{`{"type":"started","id":"b","execution_count":1}`, "CLOSE"}
	})
	_, err := c.Execute(context.Background(), kernel.ExecRequest{ID: "b", Code: "x"}, nil)
	var eerr *kernel.ExecError
	if !errors.As(err, &eerr) || eerr.ID != "b" || !errors.Is(err, kernel.ErrConnectionLost) {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Execute(context.Background(), kernel.ExecRequest{Code: "y"}, nil); !errors.Is(err, kernel.ErrConnectionLost) {
		t.Fatalf("after loss: %v", err)
	}
}

func TestClosedClient(t *testing.T) {
	c := scripted(t, hello, func(map[string]any) []string { return nil })
	c.Close()
	if _, err := c.Execute(context.Background(), kernel.ExecRequest{Code: "1"}, nil); !errors.Is(err, kernel.ErrClosed) {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Inspect(context.Background()); !errors.Is(err, kernel.ErrClosed) {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentExecutionsRoutedByID(t *testing.T) {
	// The fake answers the second request first: replies must still reach
	// the call that asked.
	pending := make(chan map[string]any, 2)
	c := scripted(t, hello, func(req map[string]any) []string {
		pending <- req
		if len(pending) < 2 {
			return nil
		}
		var out []string
		for range 2 {
			r := <-pending
			id := r["id"].(string)
			out = append([]string{`{"type":"stream","id":"` + id + `","name":"stdout","text":"` + id + `"}`, `{"type":"result","id":"` + id + `","execution_count":1}`}, out...)
		}
		return out
	})
	type res struct {
		id, out string
		err     error
	}
	done := make(chan res, 2)
	for _, id := range []string{"one", "two"} {
		go func() {
			r, err := c.Execute(context.Background(), kernel.ExecRequest{ID: id, Code: "pass"}, nil)
			if err != nil {
				done <- res{id: id, err: err}
				return
			}
			done <- res{id: id, out: r.Stdout}
		}()
	}
	for range 2 {
		r := <-done
		if r.err != nil || r.out != r.id {
			t.Fatalf("%s got %q (%v)", r.id, r.out, r.err)
		}
	}
}

func TestGarbageFromKernelIsProtocolError(t *testing.T) {
	c := scripted(t, hello, func(map[string]any) []string { return []string{"{not json"} })
	if _, err := c.Execute(context.Background(), kernel.ExecRequest{Code: "1"}, nil); !errors.Is(err, kernel.ErrProtocol) {
		t.Fatalf("err = %v", err)
	}
}
