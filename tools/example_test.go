package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/tools"
)

type threadKey struct{}

// A minimal agent loop: the model (scripted here) asks for tools by name,
// the loop runs them and hands the text back. In a real backend m is a
// *session.Manager and the calls come from a model's API.
func Example() {
	m := &fake{result: &session.Result{
		Stdout:  "hello\n",
		Outputs: []kernel.Output{{Kind: "execute_result", Data: map[string]string{"text/plain": "42"}}},
	}}
	byName := map[string]tools.Tool{}
	for _, t := range tools.New(m, tools.Options{
		SessionKey: func(ctx context.Context) (string, error) {
			return ctx.Value(threadKey{}).(string), nil
		},
	}) {
		byName[t.Name] = t
	}

	model := []struct{ id, name, input string }{
		{"call_1", "code_sandbox", `{"code": "print('hello')\n6*7"}`},
		{"call_2", "code_sandbox", `{"code": 42}`}, // a mistake the model can fix
		{"call_3", "search_web", `{}`},
	}
	ctx := context.WithValue(context.Background(), threadKey{}, "thread-1")
	for _, c := range model {
		tool, ok := byName[c.name]
		if !ok {
			fmt.Printf("[%s] no tool named %s\n", c.id, c.name)
			continue
		}
		reply, err := tool.Call(tools.WithCallID(ctx, c.id), json.RawMessage(c.input))
		if err != nil {
			fmt.Println("system failure:", err) // stop the agent, not the model's fault
			return
		}
		fmt.Printf("[%s] %s", c.id, reply)
		fmt.Println()
	}
	// Output:
	// [call_1] stdout:
	// hello
	// result:
	// 42
	//
	// [call_2] Invalid input: field "code" must be a string, not number. Expected a JSON object like {"code": "import math\nprint(math.pi)", "timeout_s": 60}.
	// [call_3] no tool named search_web
}
