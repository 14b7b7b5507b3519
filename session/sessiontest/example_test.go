package sessiontest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// A Manager runs on the in-memory driver: no engine, no image build.
func Example() {
	dir, err := os.MkdirTemp("", "sessiontest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := config.Default()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")

	ctx := context.Background()
	m, err := session.NewManager(ctx, cfg, session.WithDriver(sessiontest.NewDriver()))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)

	if _, err := m.Exec(ctx, "thread-1", "x = 42"); err != nil {
		log.Fatal(err)
	}
	res, err := m.Exec(ctx, "thread-1", "print('hello')\nx")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
	fmt.Println(res.Outputs[0].Data["text/plain"], res.ExecutionCount)
	// Output:
	// hello
	// 42 2
}

// Kill plays a container dying behind the Manager's back: the next call
// reports the session lost, the one after starts afresh.
func ExampleDriver_Kill() {
	dir, err := os.MkdirTemp("", "sessiontest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := config.Default()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")

	ctx := context.Background()
	d := sessiontest.NewDriver()
	m, err := session.NewManager(ctx, cfg, session.WithDriver(d))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)

	info, err := m.Start(ctx, "thread-1")
	if err != nil {
		log.Fatal(err)
	}
	d.Kill(info.ContainerID)

	_, err = m.Exec(ctx, "thread-1", "x = 1")
	fmt.Println(errors.Is(err, session.ErrSessionLost))
	res, err := m.Exec(ctx, "thread-1", "x")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Error.Name, res.ExecutionCount)
	// Output:
	// true
	// NameError 1
}
