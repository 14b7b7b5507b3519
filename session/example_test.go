package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// A backend keeps one Manager and runs each tool call in the conversation's
// session, with the call's id: a retried call replays its recorded result
// instead of running twice.
func ExampleManager_Exec() {
	ctx := context.Background()
	cfg, opts, cleanup := exampleSetup() // in a backend: cfg, err := config.Load()
	defer cleanup()
	mgr, err := session.NewManager(ctx, cfg, opts...)
	if err != nil {
		log.Fatal(err) // errors.Is(err, session.ErrImageMissing): run sandbox-setup
	}
	defer mgr.Close(ctx)
	defer mgr.Stop(ctx, "thread-42") // sessions outlive their Manager unless stopped

	for range 2 { // the same tool call, retried
		res, err := mgr.Exec(ctx, "thread-42", "print('summing')\ntotal = sum(range(10))\ntotal",
			session.ExecID("call_abc"),
			session.OnEvent(func(e kernel.Event) { // output as it is written
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
			fmt.Println(res.Outputs[0].Data["text/plain"], "replayed:", res.Replayed)
		}
	}
	// Output:
	// summing
	// 45 replayed: false
	// 45 replayed: true
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
