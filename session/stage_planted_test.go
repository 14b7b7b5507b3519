package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// TestStagingRefusesPlantedPaths: dataset staging never writes through a
// path the sandbox controls and never waits on what the sandbox planted.
// Code plants a FIFO at the name the old staging used for its temporary file
// (the open for writing blocked until a reader came: the selection never
// answered and the session's turn stayed held), a link there (the write went
// through it into another file of the session), and a link in place of
// /session/data. Each selection must answer within its bound and leave the
// planted target as it was.
func TestStagingRefusesPlantedPaths(t *testing.T) {
	t.Parallel()
	srv, _ := datasetAPI(t)
	api := func(c *config.Config) {
		c.DatasetAccess = config.AccessAPI
		c.DatasetsAPIURL = srv.URL + "/d/{id}"
	}
	storages(t, func(t *testing.T, s config.Storage) {
		cfg := testConfig(t, withStorage(s, api))
		stagePlanted(t, managerFor(t, cfg, namespace()), cfg, ".sales.parquet.part", true)
	})
	// Through the engine (a remote engine: no host path at all), the
	// staging runs as the sandbox user inside the sandbox, where a link
	// leads only where the code itself may write; a FIFO must still not
	// hold it. Its old temporary name was <name>.part.
	t.Run("through the engine", func(t *testing.T) {
		t.Parallel()
		d, closer, err := session.NewDockerDriver()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		cfg := testConfig(t, api)
		stagePlanted(t, managerFor(t, cfg, namespace(), session.WithDriver(streamOnly{d})), cfg, "sales.parquet.part", false)
	})
}

// stagePlanted plants, in a session each, a FIFO and a link at part (the
// temporary name the staging used) and, with hostPaths, a link in place of
// /session/data, then selects a dataset.
func stagePlanted(t *testing.T, m *session.Manager, cfg config.Config, part string, hostPaths bool) {
	cases := []struct {
		name, plant string
		loaded      bool   // the selection must succeed (the plant is beside the point)
		check       string // code printing "ok" when the plant's target is untouched
		host        bool   // a case of the host's paths only
	}{
		{
			name:   "fifo at the part name",
			plant:  "os.makedirs('/session/data', exist_ok=True); os.mkfifo('/session/data/" + part + "')",
			loaded: true,
			check:  "import stat; print('ok' if stat.S_ISFIFO(os.lstat('/session/data/" + part + "').st_mode) else 'replaced')",
		},
		{
			name: "link at the part name",
			plant: "os.makedirs('/session/data', exist_ok=True); open('/session/victim', 'w').write('keep')\n" +
				"os.symlink('../victim', '/session/data/" + part + "')",
			loaded: true,
			check:  "print('ok' if open('/session/victim', 'rb').read() == b'keep' else 'written through the link')",
		},
		{
			name: "link at the data folder",
			plant: "import shutil; shutil.rmtree('/session/data', ignore_errors=True); os.makedirs('/session/elsewhere')\n" +
				"os.symlink('elsewhere', '/session/data')",
			check: "print('ok' if os.listdir('/session/elsewhere') == [] else 'written through the link: %s' % os.listdir('/session/elsewhere'))",
			host:  true,
		},
	}
	for i, c := range cases {
		if c.host && !hostPaths {
			continue
		}
		key := "plant" + string(rune('a'+i))
		if res := mustExec(t, m, key, "import os\n"+c.plant); res.Error != nil {
			t.Fatalf("%s: plant: %+v", c.name, res.Error)
		}
		sel, err := selectWithin(t, m, key, "sales.parquet", 45*time.Second)
		if err != nil {
			t.Errorf("%s: staging waited on what the sandbox planted: %v", c.name, err)
			unblock(t, cfg, containerOf(t, m, key), key, part)
			continue
		}
		if c.loaded && sel.Status != datasets.StatusLoaded {
			t.Errorf("%s: %+v, want LOADED (staging must not use a name the sandbox can plant)", c.name, sel)
		}
		if !c.loaded && sel.Status == datasets.StatusLoaded {
			if res := mustExec(t, m, key, "import os; print(os.path.islink('/session/data'))"); strings.TrimSpace(res.Stdout) != "False" {
				t.Errorf("%s: LOADED while /session/data is still the planted link", c.name)
			}
		}
		if res := mustExec(t, m, key, "import os\n"+c.check); strings.TrimSpace(res.Stdout) != "ok" {
			t.Errorf("%s: staging wrote through a path the sandbox controls: %q %+v", c.name, res.Stdout, res.Error)
		}
		if c.loaded {
			res := mustExec(t, m, key, "import pandas as pd\nprint(len(pd.read_parquet('/session/data/sales.parquet')))")
			if strings.TrimSpace(res.Stdout) != "3" {
				t.Errorf("%s: staged file: %q %+v", c.name, res.Stdout, res.Error)
			}
		}
	}
}

// selectWithin selects a dataset and gives up after d: staging blocked in a
// system call does not see its context, so the wait is bounded here.
func selectWithin(t *testing.T, m *session.Manager, key, id string, d time.Duration) (session.Selection, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	type answer struct {
		sel session.Selection
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		sel, err := m.SelectDataset(ctx, key, id)
		ch <- answer{sel, err}
	}()
	select {
	case a := <-ch:
		return a.sel, a.err
	case <-time.After(d + 5*time.Second):
		return session.Selection{}, context.DeadlineExceeded
	}
}

// unblock opens, from the host, the FIFO a blocked staging is waiting on and
// closes it, so that the staging fails and the test's manager can close:
// only a run that already failed needs it.
func unblock(t *testing.T, cfg config.Config, containerID, key, part string) {
	t.Helper()
	dir := filepath.Join(cfg.SessionsRoot, session.ID(key), session.WorkspaceDir)
	if cfg.SessionStorage != config.StorageBind {
		st, err := dockertest.Engine(t).InspectContainer(context.Background(), containerID)
		if err != nil {
			t.Logf("unblock: %v", err)
			return
		}
		dir = fmt.Sprintf("/proc/%d/root/session", st.Pid)
	}
	f, err := os.OpenFile(filepath.Join(dir, "data", part), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Logf("unblock: %v", err)
		return
	}
	f.Close()
}
