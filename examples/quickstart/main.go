// Command quickstart is the smallest real use of agentbox: it makes sure the
// sandbox image exists, opens a session manager, runs a few cells in one
// session (state carries over between them, output streams as it is
// written), shows what the session holds, and stops it. `make demo` runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

var cells = []string{
	"print(1 + 1)",
	"import pandas as pd\ndf = pd.DataFrame({'x': range(10), 'y': [v * v for v in range(10)]})\nprint('rows:', len(df))",
	"df['y'].mean()",
	"import numpy as np\nslope, intercept = np.polyfit(df['x'], df['y'], 1)\nprint(f'y = {slope:.2f} x + {intercept:.2f}')",
	"1 / 0",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if err := ensureImage(ctx, cfg); err != nil {
		return err
	}
	mgr, err := session.NewManager(ctx, cfg)
	if err != nil {
		return err
	}
	defer mgr.Close(context.WithoutCancel(ctx))

	const key = "quickstart"
	start := time.Now()
	info, err := mgr.Start(ctx, key)
	if err != nil {
		return err
	}
	fmt.Printf("session %q in container %s, ready in %s (no network, read-only root, user %s)\n\n",
		key, info.ContainerID[:12], time.Since(start).Round(time.Millisecond), cfg.User)
	defer func() {
		if err := mgr.Stop(context.WithoutCancel(ctx), key); err != nil {
			fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
			return
		}
		fmt.Println("session stopped")
	}()

	for _, code := range cells {
		fmt.Printf(">>> %s\n", strings.ReplaceAll(code, "\n", "\n... "))
		res, err := mgr.Exec(ctx, key, code, session.OnEvent(func(e kernel.Event) {
			if e.Type == kernel.EventStream {
				fmt.Print(e.Text)
			}
		}))
		if err != nil {
			return err
		}
		for _, o := range res.Outputs {
			if o.Kind == "execute_result" {
				fmt.Printf("[%d] %s\n", res.ExecutionCount, o.Data["text/plain"])
			}
		}
		if res.Error != nil {
			fmt.Printf("%s: %s\n", res.Error.Name, res.Error.Value)
		}
		fmt.Printf("    (%s)\n\n", res.Duration.Round(10*time.Microsecond))
	}

	st, err := mgr.Inspect(ctx, key)
	if err != nil {
		return err
	}
	fmt.Println("the session holds:")
	for _, v := range st.Variables {
		desc, _, _ := strings.Cut(v.Repr, "\n")
		if len(v.Shape) > 0 {
			desc = fmt.Sprintf("shape %v", v.Shape)
		}
		fmt.Printf("    %-10s %-28s %s\n", v.Name, v.Type, desc)
	}
	for _, mod := range st.Modules {
		fmt.Printf("    %-10s %-28s %s\n", mod.Name, "module", mod.Module)
	}
	fmt.Println()
	return nil
}

// ensureImage builds the sandbox image if it is missing or stale, as
// sandbox-setup would.
func ensureImage(ctx context.Context, cfg config.Config) error {
	cli, err := docker.New()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Info(ctx); err != nil {
		return err
	}
	_, err = imagesetup.Ensure(ctx, cli, imagesetup.Options{Image: cfg.SandboxImage, Out: os.Stdout})
	return err
}
