package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/session"
)

func TestLsAndStop(t *testing.T) {
	sandboxEnv(t)
	if r := agentbox(t, "", "exec", "--session", "lskey", "x = 1"); r.code != exitOK {
		t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
	}

	r := agentbox(t, "", "ls")
	if r.code != exitOK {
		t.Fatalf("ls: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "KEY ") || !strings.HasPrefix(lines[1], "lskey ") || !strings.Contains(lines[1], "running") {
		t.Errorf("ls printed %q, want a header and the lskey row", r.stdout)
	}

	list := lsJSON(t)
	if len(list) != 1 || list[0].Key != "lskey" || list[0].State != "running" || list[0].ContainerID == "" {
		t.Errorf("ls --json = %+v, want the running lskey session", list)
	}
	if len(list) == 1 && !strings.Contains(r.stdout, list[0].ContainerID[:12]) {
		t.Errorf("ls %q does not show the short container id", r.stdout)
	}

	if r := agentbox(t, "", "stop", "lskey"); r.code != exitOK || r.stdout != "stopped lskey\n" {
		t.Errorf("stop: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	if list := lsJSON(t); len(list) != 0 {
		t.Errorf("after stop, ls --json = %+v, want none", list)
	}
	r = agentbox(t, "", "stop", "lskey")
	if r.code != exitFailed || !strings.Contains(r.stderr, "no such session") {
		t.Errorf("stop again: exit %d, stderr %q, want %d and no such session", r.code, r.stderr, exitFailed)
	}
	oneErrorLine(t, r.stderr)

	for _, key := range []string{"a", "b"} {
		if r := agentbox(t, "", "exec", "--session", key, "1"); r.code != exitOK {
			t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
		}
	}
	if r := agentbox(t, "", "stop", "--all"); r.code != exitOK || !strings.HasPrefix(r.stdout, "stopped 2 sessions") {
		t.Errorf("stop --all: exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	if list := lsJSON(t); len(list) != 0 {
		t.Errorf("after stop --all, ls --json = %+v, want none", list)
	}
}

func lsJSON(t *testing.T) []session.Info {
	t.Helper()
	r := agentbox(t, "", "ls", "--json")
	if r.code != exitOK {
		t.Fatalf("ls --json: exit %d: %s", r.code, r.stderr)
	}
	var list []session.Info
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || list == nil {
		t.Fatalf("ls --json printed %q: %v (want an array, [] when empty)", r.stdout, err)
	}
	return list
}

func TestWriteTable(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	list := []session.Info{
		{Key: "default", ID: "default-1", ContainerID: "0123456789abcdef", State: "running",
			Created: now.Add(-2 * time.Hour), LastUsed: now.Add(-90 * time.Second), MemoryBytes: 30 << 20},
		{ID: "x-2", ContainerID: "fedcba", State: "exited"},
	}
	var b strings.Builder
	writeTable(&b, list, now)
	want := "" +
		"KEY      ID         CONTAINER     STATE    AGE   IDLE   MEMORY\n" +
		"default  default-1  0123456789ab  running  2h0m  1m30s  30.0 MiB\n" +
		"-        x-2        fedcba        exited   -     -      -\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestWriteTablePausedByIdle: ls tells a session the idle sweep paused
// (its next call resumes it) from one a caller paused, and shows an
// expired one as such.
func TestWriteTablePausedByIdle(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	var b strings.Builder
	writeTable(&b, []session.Info{
		{Key: "a", ID: "a-1", ContainerID: "c1", State: "paused", PausedBy: session.PausedByIdle},
		{Key: "b", ID: "b-1", ContainerID: "c2", State: "paused", PausedBy: session.PausedByUser},
		{Key: "c", ID: "c-1", ContainerID: "c3", State: session.StateExpired},
	}, now)
	for _, want := range []string{"a    a-1  c1         paused (idle)", "b    b-1  c2         paused  ", "c    c-1  c3         expired"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table does not show %q:\n%s", want, b.String())
		}
	}
	var info strings.Builder
	writeInfo(&info, session.Info{Key: "a", State: "paused", PausedBy: session.PausedByIdle, Paused: now}, now)
	if !strings.Contains(info.String(), "by its idle timeout (its next call resumes it)") {
		t.Errorf("info of an idle-paused session:\n%s", info.String())
	}
}

func TestSinceAndHumanBytes(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {59 * time.Second, "59s"}, {61 * time.Second, "1m1s"},
		{3*time.Hour + 5*time.Minute, "3h5m"}, {50 * time.Hour, "2d2h"},
	} {
		if got := since(now.Add(-tt.d), now); got != tt.want {
			t.Errorf("since(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1536, "1.5 KiB"}, {30 << 20, "30.0 MiB"}, {3 << 30, "3.0 GiB"},
	} {
		if got := humanBytes(tt.n); got != tt.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
