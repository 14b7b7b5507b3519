// Command chat drives agentbox's tools with a real chat model through an
// OpenAI-compatible API, with the official client (github.com/openai/openai-go):
// the model writes Python, the tools run it in a sandbox session, and the
// loop goes on until the model answers. It needs OPENAI_API_KEY (and
// optionally OPENAI_BASE_URL, OPENAI_MODEL); without a key it says how to
// set one. The quickstart (make demo) never needs one. The sandbox settings
// come from the environment and .env, AGENTBOX_NAMESPACE among them.
//
//	OPENAI_API_KEY=sk-... go run ./examples/chat "What is the 20th Fibonacci number? Check it in Python."
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/telemetry"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	flush := telemetry.Start(ctx, "agentbox-chat", os.Stderr) // OTEL_* variables; off by default
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	flush()
	os.Exit(code)
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
	mgr, err := session.NewManager(ctx, cfg) // in AGENTBOX_NAMESPACE, as agentbox ls shows it
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 3
	}
	defer mgr.Close(context.WithoutCancel(ctx))
	conversation := fmt.Sprintf("chat-%d", time.Now().UnixNano())
	defer mgr.Stop(context.WithoutCancel(ctx), conversation)
	ts := tools.New(mgr, tools.Options{SessionKey: func(context.Context) (string, error) { return conversation, nil }})

	client := openai.NewClient(option.WithAPIKey(key), option.WithBaseURL(base), option.WithRequestTimeout(2*time.Minute))
	answer, err := agentLoop(ctx, &client, model, ts, question, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 1
	}
	fmt.Fprintln(stdout, answer)
	return 0
}

// agentLoop asks the model, runs the tools it calls, and feeds the results
// back until it answers in text.
func agentLoop(ctx context.Context, client *openai.Client, model string, ts []tools.Tool, question string, log io.Writer) (string, error) {
	byName := map[string]tools.Tool{}
	params := openai.ChatCompletionNewParams{
		Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You can run Python in a persistent sandbox with the code_sandbox tool. Use it to check your work."),
			openai.UserMessage(question),
		},
	}
	for _, t := range ts {
		byName[t.Name] = t
		var schema openai.FunctionParameters
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return "", fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: schema,
		}))
	}
	for turn := 0; turn < maxTurns; turn++ {
		completion, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return "", fmt.Errorf("chat model: %w", err)
		}
		if len(completion.Choices) == 0 {
			return "", errors.New("chat model: a reply without choices")
		}
		reply := completion.Choices[0].Message
		params.Messages = append(params.Messages, reply.ToParam())
		if len(reply.ToolCalls) == 0 {
			return reply.Content, nil
		}
		for _, call := range reply.ToolCalls {
			fmt.Fprintf(log, "[tool %s] %s\n", call.Function.Name, call.Function.Arguments)
			text := "unknown tool " + call.Function.Name
			if t, ok := byName[call.Function.Name]; ok {
				// The call id makes a retried call replay, never run twice.
				out, err := t.Call(tools.WithCallID(ctx, call.ID), json.RawMessage(call.Function.Arguments))
				if err != nil {
					return "", err
				}
				text = out
			}
			fmt.Fprintf(log, "[result] %s\n", firstLines(text, 6))
			params.Messages = append(params.Messages, openai.ToolMessage(text, call.ID))
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
