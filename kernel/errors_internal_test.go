package kernel

import (
	"errors"
	"strings"
	"testing"
)

// TestIDConflictSaysItOnce: the init's id_conflict error, wrapped as the
// client returns it, names the id and the reason once each.
func TestIDConflictSaysItOnce(t *testing.T) {
	err := error(&ExecError{ID: "call-7", Err: remoteError("id_conflict", "execution id 'call-7' was already used for different code")})
	if !errors.Is(err, ErrIDConflict) {
		t.Fatalf("%v is not ErrIDConflict", err)
	}
	msg := err.Error()
	if strings.Count(msg, "call-7") != 1 || strings.Count(msg, "already used for different code") != 1 {
		t.Errorf("error %q: want the id and the reason once each", msg)
	}
}
