package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// A backend keeps one Manager and runs each tool call in the conversation's
// session. (Not run by go test: it needs the engine and the image.)
func ExampleManager_Exec() {
	ctx := context.Background()
	cfg, err := config.Load()
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := session.NewManager(ctx, cfg)
	if err != nil {
		log.Fatal(err) // errors.Is(err, session.ErrImageMissing): run sandbox-setup
	}
	defer mgr.Close(ctx)

	res, err := mgr.Exec(ctx, "thread-42", "total = sum(range(10))\ntotal",
		session.ExecID("call_abc"), // a retry with this id replays instead of running twice
		session.OnEvent(func(e kernel.Event) {
			if e.Type == kernel.EventStream {
				fmt.Print(e.Text)
			}
		}))
	switch {
	case errors.Is(err, session.ErrSessionLost):
		log.Print("the sandbox was lost; the next call starts a fresh one")
	case err != nil:
		log.Fatal(err)
	case res.Error != nil:
		fmt.Println(res.Error.Name, res.Error.Value)
	default:
		fmt.Println(res.Outputs[0].Data["text/plain"])
	}
}

// Any string is a key: its id is a safe file and container name, the same
// in every process.
func ExampleID() {
	fmt.Println(session.ID("default"))
	fmt.Println(session.ID("../../etc"))
	// Output:
	// default-37a8eec1ce19687d
	// etc-74ccf3c5b4c19a81
}
