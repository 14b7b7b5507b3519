// Command quickstart uses agentbox the way an agent backend does: it makes
// sure the sandbox image exists, opens a session manager with an in-process
// dataset source, stages a small Parquet dataset into a session, runs a few
// steps whose state carries over (load, statistics, a fit, a chart), serves
// the chart the code saved under /session/artifacts through a signed URL,
// downloads it once through that URL, and cleans up. `make demo` runs it.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/imagesetup"
	"github.com/agentbox/agentbox/internal/telemetry"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// steps are what an agent would send, one tool call each.
var steps = []string{
	"import pandas as pd\ndf = pd.read_parquet('/session/data/measurements.parquet')\nprint(df.shape)\ndf.head(3)",
	"df.describe().loc[['mean', 'std', 'min', 'max']].round(2)",
	"import numpy as np\nslope, intercept = np.polyfit(df['x'], df['y'], 1)\nprint(f'y ≈ {slope:.2f}·x + {intercept:.2f}')",
	"import os, matplotlib.pyplot as plt\nos.makedirs('/session/artifacts', exist_ok=True)\nfig, ax = plt.subplots(figsize=(6, 4))\nax.scatter(df['x'], df['y'], s=8, label='measurements')\nax.plot(df['x'], slope * df['x'] + intercept, color='red', label='fit')\nax.legend()\nfig.savefig('/session/artifacts/fit.png', dpi=100)\nplt.close(fig)\nprint('chart saved')",
}

type measurement struct {
	X float64 `parquet:"x"`
	Y float64 `parquet:"y"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	flush := telemetry.Start(ctx, "agentbox-quickstart", os.Stderr) // OTEL_* variables; off by default
	err := run(ctx)
	flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	start := time.Now()
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if err := ensureImage(ctx, cfg); err != nil {
		return err
	}
	// The demo keeps its database, blobs and exports in a folder of its own
	// and removes it at the end.
	dir, err := os.MkdirTemp("", "agentbox-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.BlobstoreDir = filepath.Join(dir, "blobstore")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	cfg.ExportDir = filepath.Join(dir, "exports")
	cfg.DatasetAccess = config.AccessAPI

	// Serve downloads the way artifact-server does, on a loopback port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cfg.ArtifactPublicURL = "http://" + ln.Addr().String()
	srv, downloads, err := artifactServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer downloads.Close()
	go srv.Serve(ln)
	defer srv.Close()

	data, err := makeDataset()
	if err != nil {
		return err
	}
	fetch := datasets.BytesFetcher(func(ctx context.Context, req datasets.Request) ([]byte, error) {
		if req.ID != "measurements.parquet" { // req.SessionKey says who asks, to authorize by
			return nil, fmt.Errorf("%w: %s", datasets.ErrNotFound, req.ID)
		}
		return data, nil
	})
	mgr, err := session.NewManager(ctx, cfg, session.WithFetcher(fetch), session.WithNamespace("quickstart"))
	if err != nil {
		return err
	}
	defer mgr.Close(context.WithoutCancel(ctx))

	const key = "quickstart"
	t := time.Now()
	info, err := mgr.Start(ctx, key)
	if err != nil {
		return err
	}
	defer func() {
		if err := mgr.Stop(context.WithoutCancel(ctx), key); err == nil {
			fmt.Println("session stopped, demo files removed")
		}
	}()
	fmt.Printf("session %q ready in %s: container %s, no network, read-only root, user %s\n",
		key, time.Since(t).Round(time.Millisecond), info.ContainerID[:12], cfg.User)

	sel, err := mgr.SelectDataset(ctx, key, "measurements.parquet")
	if err != nil {
		return err
	}
	if sel.Status != datasets.StatusLoaded {
		return fmt.Errorf("dataset %s: %s", sel.Status, sel.Reason)
	}
	list, err := mgr.Datasets(ctx, key)
	if err != nil {
		return err
	}
	fmt.Printf("dataset staged at %s\n    %s\n\n", sel.Path, list.Files[0].Summary())

	var chart session.Artifact
	for _, code := range steps {
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
			return fmt.Errorf("step failed: %s: %s", res.Error.Name, res.Error.Value)
		}
		for _, a := range res.Artifacts {
			fmt.Printf("artifact %s (%d bytes, %s)\n    %s\n", a.Name, a.Size, a.MIME, a.URL)
			if a.Name == "fit.png" {
				chart = a
			}
		}
		fmt.Printf("    (%s)\n\n", res.Duration.Round(10*time.Microsecond))
	}
	if chart.URL == "" {
		return fmt.Errorf("the chart was not ingested as an artifact")
	}
	if err := checkDownload(ctx, chart); err != nil {
		return err
	}
	fmt.Printf("downloaded %s through its signed URL: %d bytes, sha256 matches\n", chart.Name, chart.Size)
	fmt.Printf("done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// makeDataset writes 200 noisy points on a line as Parquet.
func makeDataset() ([]byte, error) {
	rows := make([]measurement, 200)
	for i := range rows {
		x := float64(i) / 10
		rows[i] = measurement{X: x, Y: 3*x + 2 + 4*math.Sin(float64(i)*1.7)}
	}
	var buf bytes.Buffer
	err := parquet.Write(&buf, rows)
	return buf.Bytes(), err
}

// artifactServer serves the downloads of the demo's configuration, as a
// program's own server would: artifacts.Open is the handler artifact-server
// runs.
func artifactServer(ctx context.Context, cfg config.Config) (*http.Server, *artifacts.Handler, error) {
	h, err := artifacts.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, h, nil
}

// checkDownload fetches an artifact through its URL and checks its bytes.
func checkDownload(ctx context.Context, a session.Artifact) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	if resp.StatusCode != http.StatusOK || hex.EncodeToString(sum[:]) != a.SHA256 {
		return fmt.Errorf("download %s: %s, %d bytes, sha256 %x", a.URL, resp.Status, len(body), sum[:6])
	}
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
