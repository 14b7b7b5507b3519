package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/peterh/liner"
)

// historyEnv names the file the repl keeps its history in across runs:
// ~/.agentbox_history by default, none when set to the empty string.
const historyEnv = "AGENTBOX_HISTORY"

// historyFile is the default history file, in the home folder.
const historyFile = ".agentbox_history"

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// historyPath returns the history file to use; "" for none.
func historyPath() string {
	if p, ok := os.LookupEnv(historyEnv); ok {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, historyFile)
}

// loopTerminal is loop for a person at a terminal, with line editing by
// github.com/peterh/liner: arrows and the usual Emacs keys move in the
// line, Up and Down (Ctrl-P, Ctrl-N) recall earlier lines, Ctrl-R searches
// them, and the history persists in historyPath(). At the prompt Ctrl-C
// clears the input and Ctrl-D ends the repl; while code runs, Ctrl-C
// interrupts it (the terminal delivers SIGINT between prompts).
func (r *repl) loopTerminal(ctx context.Context) int {
	ln := liner.NewLiner() // restores the terminal on Close
	defer ln.Close()
	ln.SetCtrlCAborts(true)
	ln.SetMultiLineMode(true)
	hist := historyPath()
	if hist != "" {
		if f, err := os.Open(hist); err == nil {
			ln.ReadHistory(f)
			f.Close()
		}
		defer func() {
			if err := saveHistory(ln, hist); err != nil {
				fmt.Fprintf(r.stderr, "agentbox: history not saved: %s\n", oneLine(err))
			}
		}()
	}
	type answer struct {
		line string
		err  error
	}
	var buf []string
	for {
		prompt := promptFirst
		if len(buf) > 0 {
			prompt = promptMore
		}
		// The prompt waits in a goroutine so that SIGTERM (ctx) still ends
		// the repl; the goroutine ends with the process.
		got := make(chan answer, 1)
		go func() {
			line, err := ln.Prompt(prompt)
			got <- answer{line, err}
		}()
		var a answer
		select {
		case <-ctx.Done():
			fmt.Fprintln(r.stderr)
			return exitInterrupted
		case a = <-got:
		}
		switch {
		case errors.Is(a.err, liner.ErrPromptAborted): // Ctrl-C at the prompt
			fmt.Fprintln(r.stderr, "KeyboardInterrupt")
			buf = nil
			continue
		case errors.Is(a.err, io.EOF): // Ctrl-D
			if strings.TrimSpace(strings.Join(buf, "")) != "" {
				r.execute(ctx, strings.Join(buf, "\n"))
			}
			fmt.Fprintln(r.stderr)
			return exitOK
		case a.err != nil:
			fmt.Fprintf(r.stderr, "agentbox: repl: %s\n", oneLine(a.err))
			return exitSandbox
		}
		if strings.TrimSpace(a.line) != "" {
			ln.AppendHistory(a.line)
		}
		buf = r.add(ctx, buf, a.line)
	}
}

// saveHistory writes the history to path, owner-only (it may hold
// secrets typed at the prompt), through a temporary file so that a crash
// never leaves half of it.
func saveHistory(ln *liner.State, path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, a no-op
	if _, err := ln.WriteHistory(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
