// Command chat drives agentbox's tools with a real chat model through an
// OpenAI-compatible API: the model writes Python, the tools run it in a
// sandbox session, and the loop goes on until the model answers. It needs
// OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL); without a
// key it says how to set one. The quickstart (make demo) never needs one.
//
//	OPENAI_API_KEY=sk-... go run ./examples/chat "What is the 20th Fibonacci number? Check it in Python."
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// maxTurns bounds the agent loop: a model that keeps calling tools is
// stopped rather than run forever.
const maxTurns = 8

func run(ctx context.Context, args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	key, ok := env("OPENAI_API_KEY")
	if !ok || key == "" {
		fmt.Fprintln(stderr, "chat: set OPENAI_API_KEY to an API key of an OpenAI-compatible service "+
			"(and OPENAI_BASE_URL for one other than https://api.openai.com/v1, OPENAI_MODEL for a model other than gpt-4o-mini); "+
			"make demo shows agentbox without any key")
		return 2
	}
	base, _ := env("OPENAI_BASE_URL")
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	model, _ := env("OPENAI_MODEL")
	if model == "" {
		model = "gpt-4o-mini"
	}
	question := strings.Join(args, " ")
	if question == "" {
		question = "Compute the mean and standard deviation of the first 1000 primes with Python, and plot a histogram of their gaps."
	}
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 2
	}
	ns, _ := env("AGENTBOX_NAMESPACE")
	var opts []session.Option
	if ns != "" {
		opts = append(opts, session.WithNamespace(ns))
	}
	mgr, err := session.NewManager(ctx, cfg, opts...)
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 3
	}
	defer mgr.Close(context.WithoutCancel(ctx))
	conversation := fmt.Sprintf("chat-%d", time.Now().UnixNano())
	defer mgr.Stop(context.WithoutCancel(ctx), conversation)
	ts := tools.New(mgr, tools.Options{SessionKey: func(context.Context) (string, error) { return conversation, nil }})

	c := &client{base: strings.TrimRight(base, "/"), key: key, model: model, http: &http.Client{Timeout: 2 * time.Minute}}
	answer, err := agentLoop(ctx, c, ts, question, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 1
	}
	fmt.Fprintln(stdout, answer)
	return 0
}

// agentLoop asks the model, runs the tools it calls, and feeds the results
// back until it answers in text.
func agentLoop(ctx context.Context, c *client, ts []tools.Tool, question string, log io.Writer) (string, error) {
	byName := map[string]tools.Tool{}
	var specs []toolSpec
	for _, t := range ts {
		byName[t.Name] = t
		specs = append(specs, toolSpec{Type: "function", Function: functionSpec{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	messages := []message{
		{Role: "system", Content: "You can run Python in a persistent sandbox with the code_sandbox tool. Use it to check your work."},
		{Role: "user", Content: question},
	}
	for turn := 0; turn < maxTurns; turn++ {
		reply, err := c.complete(ctx, messages, specs)
		if err != nil {
			return "", err
		}
		messages = append(messages, reply)
		if len(reply.ToolCalls) == 0 {
			return reply.Content, nil
		}
		for _, call := range reply.ToolCalls {
			fmt.Fprintf(log, "[tool %s] %s\n", call.Function.Name, call.Function.Arguments)
			text := "unknown tool " + call.Function.Name
			if t, ok := byName[call.Function.Name]; ok {
				out, err := t.Call(ctx, json.RawMessage(call.Function.Arguments))
				if err != nil {
					return "", err
				}
				text = out
			}
			fmt.Fprintf(log, "[result] %s\n", firstLines(text, 6))
			messages = append(messages, message{Role: "tool", ToolCallID: call.ID, Content: text})
		}
	}
	return "", errors.New("the model kept calling tools; stopped after 8 turns")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// The parts of the chat completions API the loop uses.
type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolSpec struct {
	Type     string       `json:"type"`
	Function functionSpec `json:"function"`
}

type functionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type client struct {
	base, key, model string
	http             *http.Client
}

func (c *client) complete(ctx context.Context, messages []message, specs []toolSpec) (message, error) {
	body, err := json.Marshal(map[string]any{"model": c.model, "messages": messages, "tools": specs})
	if err != nil {
		return message{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return message{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return message{}, fmt.Errorf("chat model: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return message{}, fmt.Errorf("chat model: %s: %.300s", resp.Status, data)
	}
	var out struct {
		Choices []struct {
			Message message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 {
		return message{}, fmt.Errorf("chat model: unexpected reply %.300s", data)
	}
	return out.Choices[0].Message, nil
}
