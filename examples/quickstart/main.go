// Command quickstart is the smallest real use of agentbox: it makes sure the
// sandbox image exists, starts one locked-down sandbox container, runs a few
// cells through the persistent kernel (state carries over between them), and
// removes the container. `make demo` runs it.
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
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/kernel"
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
	cli, err := docker.New()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Info(ctx); err != nil {
		return err
	}
	if _, err := imagesetup.Ensure(ctx, cli, imagesetup.Options{Image: cfg.SandboxImage, Out: os.Stdout}); err != nil {
		return err
	}

	start := time.Now()
	spec := imagesetup.LockedDown(cfg.SandboxImage)
	spec.MemoryBytes = int64(cfg.MemoryMB) << 20
	spec.NanoCPUs = int64(cfg.CPUs * 1e9)
	spec.PidsLimit = int64(cfg.PidsLimit)
	spec.Labels = map[string]string{"io.agentbox.demo": "quickstart"}
	id, err := cli.CreateContainer(ctx, spec)
	if err != nil {
		return err
	}
	defer func() {
		if err := cli.RemoveContainer(context.WithoutCancel(ctx), id); err != nil {
			fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
		}
		fmt.Println("sandbox removed")
	}()
	kc, err := dockertest.DialErr(ctx, cli, id)
	if err != nil {
		return err
	}
	defer kc.Close()
	h := kc.Hello()
	fmt.Printf("sandbox %s up in %s: Python %s, kernel protocol %d, no network, read-only root, user 1000\n\n",
		id[:12], time.Since(start).Round(time.Millisecond), h.Python, h.Protocol)

	for _, code := range cells {
		fmt.Printf(">>> %s\n", strings.ReplaceAll(code, "\n", "\n... "))
		res, err := kc.Execute(ctx, kernel.ExecRequest{Code: code, Timeout: cfg.ExecTimeout}, func(e kernel.Event) {
			if e.Type == kernel.EventStream {
				fmt.Print(e.Text)
			}
		})
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
	return nil
}
