package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

const (
	promptFirst = ">>> "
	promptMore  = "... "
)

// runRepl is `agentbox repl`: an interactive prompt on one session.
func runRepl(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("repl")
	key := fs.String("session", "default", "")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox: repl: unexpected argument %q (see agentbox help)\n", fs.Arg(0))
		return exitUsage
	}
	// Ctrl-C never ends the repl: it interrupts the running code or clears
	// the input. Registering before the session starts keeps an early Ctrl-C
	// from killing the process with the default handler.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)

	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	// Start the session now, so that a broken sandbox shows before the user
	// types anything.
	info, err := m.Start(ctx, *key)
	if err != nil {
		return failure(ctx, stderr, err)
	}
	fmt.Fprintf(stderr, "agentbox: session %q (container %s); Ctrl-C interrupts, Ctrl-D exits\n", *key, termsafe.Line(shortContainer(info.ContainerID)))

	r := &repl{m: m, key: *key, stdout: stdout, stderr: stderr, sigs: sigs}
	if f, ok := stdin.(*os.File); ok && f == os.Stdin && isTerminal(os.Stdin) && isTerminal(os.Stdout) {
		// A person at a terminal: line editing and history.
		return r.loopTerminal(ctx)
	}
	done := make(chan struct{})
	defer close(done)
	r.lines = readLines(stdin, done)
	return r.loop(ctx)
}

// repl is the state of one prompt session.
type repl struct {
	m              *session.Manager
	key            string
	stdout, stderr io.Writer
	sigs           <-chan os.Signal
	lines          <-chan string // closed at the end of the input (not at a terminal)
}

// loop reads statements and runs them until the input ends, when the input
// is not a terminal (a pipe, a file). Prompts go to stderr, as Python's do
// without a terminal, so that stdout carries only what the code printed.
func (r *repl) loop(ctx context.Context) int {
	var buf []string
	for {
		if len(buf) == 0 {
			io.WriteString(r.stderr, promptFirst)
		} else {
			io.WriteString(r.stderr, promptMore)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(r.stderr)
			return exitInterrupted
		case <-r.sigs:
			fmt.Fprintln(r.stderr, "\nKeyboardInterrupt")
			buf = nil
		case line, ok := <-r.lines:
			if !ok {
				// End of input (Ctrl-D): what was typed but not yet run
				// runs, as at the end of a piped script.
				if strings.TrimSpace(strings.Join(buf, "")) != "" {
					r.execute(ctx, strings.Join(buf, "\n"))
				}
				fmt.Fprintln(r.stderr)
				return exitOK
			}
			buf = r.add(ctx, buf, line)
		}
	}
}

// add takes one more line typed after those in buf: it runs the statement
// the line completes and returns nil, or returns the lines kept for the
// next. Whether the input is complete is Python's own decision, asked of
// the session (Manager.IsComplete): "def f():" waits for its body, "def
// f(:" runs at once and the kernel reports the SyntaxError. A Ctrl-C
// during the check drops the input, as at the prompt.
func (r *repl) add(ctx context.Context, buf []string, line string) []string {
	if len(buf) == 0 && strings.TrimSpace(line) == "" {
		return nil
	}
	buf = append(buf, line)
	src := strings.Join(buf, "\n")
	c, err := r.m.IsComplete(ctx, r.key, src)
	if ctx.Err() != nil {
		return nil // the loop ends
	}
	if err != nil {
		// The kernel will say what is wrong with the input, if anything.
		fmt.Fprintf(r.stderr, "agentbox: cannot ask the session whether the input is complete (%s); running it\n", oneLine(err))
	}
	select {
	case <-r.sigs:
		fmt.Fprintln(r.stderr, "\nKeyboardInterrupt")
		return nil
	default:
	}
	if err == nil && c == session.Incomplete {
		return buf
	}
	r.execute(ctx, src)
	return nil
}

// execute runs one statement; Ctrl-C meanwhile cancels its context, which
// interrupts the code with KeyboardInterrupt and keeps the session's state.
// A Go error is printed and the prompt goes on: the next statement may work
// (a lost session, for one, is started afresh).
func (r *repl) execute(ctx context.Context, src string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	finished := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-r.sigs:
			cancel()
		case <-finished:
		}
	}()
	p := newPrinter(r.stdout, r.stderr, false)
	res, err := r.m.Exec(ctx, r.key, src, session.OnEvent(p.event))
	close(finished)
	wg.Wait() // so that the next Ctrl-C goes to the prompt, not to this watcher
	if err != nil {
		failure(ctx, r.stderr, err)
		return
	}
	p.finish(res)
}

// readLines sends the lines of r, without their line endings, until r ends
// or done closes.
func readLines(r io.Reader, done <-chan struct{}) <-chan string {
	out := make(chan string)
	if r == nil {
		close(out)
		return out
	}
	go func() {
		defer close(out)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				line = strings.TrimRight(line, "\r\n")
				select {
				case out <- line:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}
