package session_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/session"
	"github.com/agentbox/agentbox/session/sessiontest"
)

// fakeManager is a Manager on the in-memory driver, for what needs no
// engine: checking options happens before any container is made.
func fakeManager(t *testing.T, edit func(*config.Config)) (*session.Manager, *sessiontest.Driver) {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.ArtifactsDB = filepath.Join(dir, "artifacts.db")
	cfg.SessionsRoot = filepath.Join(dir, "sessions")
	if edit != nil {
		edit(&cfg)
	}
	d := sessiontest.NewDriver()
	m, err := session.NewManager(context.Background(), cfg, session.WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, d
}

// TestHostileOptionsRefused: every malformed or reserved option is refused
// with an *OptionError that names the option and the key at fault (never
// an environment value, which may be a secret), before any container is
// made.
func TestHostileOptionsRefused(t *testing.T) {
	m, d := fakeManager(t, func(c *config.Config) {
		c.EnvPassthrough = []string{"OPENAI_API_KEY"}
		c.MaxSessionTTL = time.Hour
		c.SessionTTL = time.Minute
	})
	const secret = "s3cr3t-value"
	long := strings.Repeat("x", 40<<10)
	for _, tt := range []struct {
		opt    session.StartOption
		option string
		name   string
		err    error
	}{
		{session.Env(map[string]string{"LD_PRELOAD": "/session/evil.so"}), "env", "LD_PRELOAD", session.ErrInvalidOption},
		{session.Env(map[string]string{"ld_library_path": "/session"}), "env", "ld_library_path", session.ErrInvalidOption},
		{session.Env(map[string]string{"AGENTBOX_USER": "0"}), "env", "AGENTBOX_USER", session.ErrInvalidOption},
		{session.Env(map[string]string{"PATH": "/session/bin"}), "env", "PATH", session.ErrInvalidOption},
		{session.Env(map[string]string{"HOME": "/session"}), "env", "HOME", session.ErrInvalidOption},
		{session.Env(map[string]string{"BASH_ENV": "/session/rc"}), "env", "BASH_ENV", session.ErrInvalidOption},
		{session.Env(map[string]string{"OPENAI_API_KEY": secret}), "env", "OPENAI_API_KEY", session.ErrInvalidOption},
		{session.Env(map[string]string{"1ABC": secret}), "env", "1ABC", session.ErrInvalidOption},
		{session.Env(map[string]string{"A=B": secret}), "env", "A=B", session.ErrInvalidOption},
		{session.Env(map[string]string{"A\nB": secret}), "env", "A\nB", session.ErrInvalidOption},
		{session.Env(map[string]string{"": secret}), "env", "", session.ErrInvalidOption},
		{session.Env(map[string]string{"TOKEN": secret + "\x00"}), "env", "TOKEN", session.ErrInvalidOption},
		{session.Env(map[string]string{"TOKEN": long}), "env", "TOKEN", session.ErrInvalidOption},
		{session.Labels(map[string]string{"owner\nforged": "x"}), "labels", "owner\nforged", session.ErrInvalidOption},
		{session.Labels(map[string]string{"a=b": "x"}), "labels", "a=b", session.ErrInvalidOption},
		{session.Labels(map[string]string{"with space": "x"}), "labels", "with space", session.ErrInvalidOption},
		{session.Labels(map[string]string{".hidden": "x"}), "labels", ".hidden", session.ErrInvalidOption},
		{session.Labels(map[string]string{"": "x"}), "labels", "", session.ErrInvalidOption},
		{session.Labels(map[string]string{"owner": "alice\nstate: running"}), "labels", "owner", session.ErrInvalidOption},
		{session.Labels(map[string]string{"owner": "\x1b]0;pwned\x07"}), "labels", "owner", session.ErrInvalidOption},
		{session.Labels(map[string]string{"owner": "evil\u202egnp.exe"}), "labels", "owner", session.ErrInvalidOption},
		{session.Labels(map[string]string{"owner": "\xff\xfe"}), "labels", "owner", session.ErrInvalidOption},
		{session.Labels(map[string]string{"owner": strings.Repeat("a", 1025)}), "labels", "owner", session.ErrInvalidOption},
		{session.TTL(-time.Second), "ttl", "", session.ErrInvalidOption},
		{session.TTL(0), "ttl", "", session.ErrAboveMaximum}, // none, with a maximum set
		{session.TTL(2 * time.Hour), "ttl", "", session.ErrAboveMaximum},
		{session.MemoryMB(32), "memory", "", session.ErrInvalidOption},
		{session.MemoryMB(2049), "memory", "", session.ErrAboveMaximum}, // above config.DefaultMaxMemoryMB
		{session.CPUs(-1), "cpus", "", session.ErrInvalidOption},
		{session.CPUs(1.5), "cpus", "", session.ErrAboveMaximum},
		{session.UseImage("other"), "image", "other", session.ErrImageNotAllowed},
		{session.UseImage("../../etc"), "image", "../../etc", session.ErrImageNotAllowed},
	} {
		_, err := m.Start(context.Background(), "k", tt.opt)
		var oe *session.OptionError
		var se *session.Error
		if !errors.As(err, &oe) || !errors.Is(err, tt.err) || !errors.As(err, &se) || se.Key != "k" {
			t.Errorf("%s %q: got %v, want an *OptionError matching %v in a *session.Error naming the key", tt.option, tt.name, err, tt.err)
			continue
		}
		if oe.Option != tt.option || oe.Name != tt.name {
			t.Errorf("%s %q: the error names option %q, %q", tt.option, tt.name, oe.Option, oe.Name)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s %q: the error shows the value: %v", tt.option, tt.name, err)
		}
		if tt.name != "" && !strings.Contains(err.Error(), `"`+strings.ReplaceAll(tt.name, "\n", `\n`)+`"`) {
			t.Errorf("%s %q: the error does not name it, quoted: %v", tt.option, tt.name, err)
		}
		// Exec refuses the same option the same way.
		if _, err := m.Exec(context.Background(), "k", "1", session.CreateWith(tt.opt)); !errors.Is(err, tt.err) {
			t.Errorf("%s %q: Exec with it: %v", tt.option, tt.name, err)
		}
	}
	if n := d.Created(); n != 0 {
		t.Errorf("%d containers were created for refused options", n)
	}
	// Within the limits, the same kinds are accepted.
	if _, err := m.Start(context.Background(), "ok", session.Env(map[string]string{"MY_VAR": "x\ny"}),
		session.Labels(map[string]string{"owner": "alice", "team/name": "ml-ops"}), session.TTL(time.Hour),
		session.MemoryMB(512), session.CPUs(0.5), session.UseImage("default")); err != nil {
		t.Fatalf("good options refused: %v", err)
	}
}

// TestRenewRefused: a renewal of nothing, of no time, or past the maximum
// is refused with the reason.
func TestRenewRefused(t *testing.T) {
	m, _ := fakeManager(t, func(c *config.Config) { c.MaxSessionTTL = time.Hour; c.SessionTTL = time.Minute })
	ctx := context.Background()
	if _, err := m.Renew(ctx, "none", time.Minute); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("renew a missing session: %v", err)
	}
	if _, err := m.Start(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := m.Renew(ctx, "k", d); !errors.Is(err, session.ErrInvalidOption) {
			t.Errorf("renew by %s: %v, want ErrInvalidOption", d, err)
		}
	}
	if _, err := m.Renew(ctx, "k", 2*time.Hour); !errors.Is(err, session.ErrAboveMaximum) {
		t.Errorf("renew past the maximum: %v, want ErrAboveMaximum", err)
	}
	exp, err := m.Renew(ctx, "k", 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	in, err := m.Info(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !in.Expires.Equal(exp.Truncate(time.Millisecond)) || time.Until(exp) < 29*time.Minute {
		t.Errorf("Info.Expires %v, Renew said %v", in.Expires, exp)
	}
}

// TestLifecycleAfterClose: the lifecycle calls fail with ErrClosed after
// Close, like every other.
func TestLifecycleAfterClose(t *testing.T) {
	m, _ := fakeManager(t, nil)
	ctx := context.Background()
	if _, err := m.Start(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{}
	calls["Pause"] = m.Pause(ctx, "k")
	calls["Resume"] = m.Resume(ctx, "k")
	_, calls["Renew"] = m.Renew(ctx, "k", time.Minute)
	_, calls["Info"] = m.Info(ctx, "k")
	_, calls["Start with options"] = m.Start(ctx, "k", session.TTL(time.Minute))
	for name, err := range calls {
		if !errors.Is(err, session.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}
