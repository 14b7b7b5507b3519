package docker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// freezeRace is what the engine answers when runc's cgroup v1 freezer
// gives up (processes forking while it freezes; a loaded machine): the
// container is left running, and a new attempt usually succeeds.
var freezeRace = errors.New("Error response from daemon: Cannot pause container 390998d4ad1a: OCI runtime pause failed: unable to freeze: unknown")

// TestFreezeRetries: Pause tries again when the engine's freezer gave up,
// a few times; other errors, and a freezer that keeps failing, are
// reported; a caller that leaves stops the waiting.
func TestFreezeRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int
		err       error
		wantErr   bool
		wantCalls int
	}{
		{"freezer gives up twice", 2, freezeRace, false, 3},
		{"freezer keeps giving up", 100, freezeRace, true, freezeAttempts},
		{"another error", 100, errors.New("Error response from daemon: something else"), true, 1},
		{"no error", 0, nil, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := freeze(context.Background(), time.Millisecond, func(context.Context) error {
				calls++
				if calls <= tc.failures {
					return tc.err
				}
				return nil
			})
			if (err != nil) != tc.wantErr || calls != tc.wantCalls {
				t.Errorf("freeze: %v after %d calls; want error %v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
			if tc.wantErr && !errors.Is(err, tc.err) {
				t.Errorf("freeze: %v, want the engine's error", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := freeze(ctx, time.Hour, func(context.Context) error {
		calls++
		cancel()
		return freezeRace
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, freezeRace) || calls != 1 {
		t.Errorf("freeze with its caller gone: %v after %d calls; want both errors after 1", err, calls)
	}
}
