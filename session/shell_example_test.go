package session_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"time"

	"github.com/agentbox/agentbox/session"
)

// A shell command runs in the session's container beside its Python, as
// the sandbox user, and streams its output; at its timeout it is killed
// with everything it started.
func ExampleManager_Run() {
	ctx := context.Background()
	cfg, opts, cleanup := exampleSetup()
	defer cleanup()
	mgr, err := session.NewManager(ctx, cfg, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close(ctx)
	defer mgr.Stop(ctx, "thread-7")

	res, err := mgr.Run(ctx, "thread-7", session.Command{
		Line:    `echo "hello from $(id -u) in $PWD, $WHO"; exit 3`,
		Env:     map[string]string{"WHO": "bash"},
		Timeout: 30 * time.Second,
		Stdout:  os.Stdout, // as it comes
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code:", res.ExitCode, "timed out:", res.TimedOut)

	res, err = mgr.Run(ctx, "thread-7", session.Command{Line: "sleep 60 & sleep 60", Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code:", res.ExitCode, "timed out:", res.TimedOut)

	_, err = mgr.Run(ctx, "thread-7", session.Command{Line: "ls", Cwd: "/session/missing"})
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	// Output:
	// hello from 1000 in /session, bash
	// exit code: 3 timed out: false
	// exit code: 143 timed out: true
	// true
}

// A background command runs until it exits or is killed; its logs are read
// from a cursor while it runs.
func ExampleManager_StartCommand() {
	ctx := context.Background()
	cfg, opts, cleanup := exampleSetup()
	defer cleanup()
	mgr, err := session.NewManager(ctx, cfg, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close(ctx)
	defer mgr.Stop(ctx, "thread-8")

	id, err := mgr.StartCommand(ctx, "thread-8", session.Command{Line: "echo ready; sleep 600"})
	if err != nil {
		log.Fatal(err)
	}
	var cursor int64
	for {
		logs, err := mgr.CommandLogs(ctx, "thread-8", id, cursor)
		if err != nil {
			log.Fatal(err)
		}
		if len(logs.Chunks) > 0 {
			fmt.Print(logs.Chunks[0].Stream, ": ", logs.Chunks[0].Data)
			break
		}
		cursor = logs.Next
		time.Sleep(50 * time.Millisecond)
	}
	if err := mgr.KillCommand(ctx, "thread-8", id); err != nil {
		log.Fatal(err)
	}
	st, err := mgr.CommandStatus(ctx, "thread-8", id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("running:", st.Running, "interrupted:", st.Result.Interrupted)
	// Output:
	// stdout: ready
	// running: false interrupted: true
}
