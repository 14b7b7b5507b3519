package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/session"
)

// TestEnvThatLoadsFilesAsRootRefused: a create request's environment
// reaches the container's init, which runs as root, so a variable that
// makes library code load a file of the caller's choosing (a config, a
// module, a certificate store, a locale, a time zone) or put its
// temporary files elsewhere is refused, with the variable named. Before,
// OPENSSL_CONF and TMPDIR (and their class) were admitted.
func TestEnvThatLoadsFilesAsRootRefused(t *testing.T) {
	m, d := fakeManager(t, nil)
	for _, tt := range []struct{ name, value string }{
		{"OPENSSL_CONF", "/session/evil.cnf"},
		{"OPENSSL_MODULES", "/session"},
		{"OPENSSL_ENGINES", "/session"},
		{"openssl_conf", "/session/evil.cnf"},
		{"SSL_CERT_FILE", "/session/ca.pem"},
		{"SSL_CERT_DIR", "/session"},
		{"TMPDIR", "/session"},
		{"TMP", "/session"},
		{"TEMP", "/session"},
		{"TEMPDIR", "/session"},
		{"GCONV_PATH", "/session"},
		{"GLIBC_TUNABLES", "glibc.malloc.check=3"},
		{"MALLOC_CHECK_", "7777"},
		{"LD_AUDIT", "/session/a.so"},
		{"LOCPATH", "/session"},
		{"NLSPATH", "/session/%N"},
		{"HOSTALIASES", "/session/hosts"},
		{"RES_OPTIONS", "debug rotate"},
		{"TERMINFO", "/session"},
		{"TERMINFO_DIRS", "/session"},
		{"LC_ALL", "/session/evil"},
		{"LC_CTYPE", "../../session/evil"},
		{"LANG", "/session/evil"},
		{"LANGUAGE", "/session/evil"},
		{"TZ", ":/session/evil"},
		{"TZ", "/session/evil"},
		{"TZ", "../../../session/evil"},
	} {
		_, err := m.Start(context.Background(), "k", session.Env(map[string]string{tt.name: tt.value}))
		var oe *session.OptionError
		if !errors.As(err, &oe) || !errors.Is(err, session.ErrInvalidOption) || oe.Name != tt.name {
			t.Errorf("%s=%s: got %v, want an *OptionError naming it", tt.name, tt.value, err)
			continue
		}
		if !strings.Contains(err.Error(), `"`+tt.name+`"`) {
			t.Errorf("%s: the error does not name it: %v", tt.name, err)
		}
		if strings.Contains(err.Error(), tt.value) {
			t.Errorf("%s: the error shows the value: %v", tt.name, err)
		}
	}
	if n := d.Created(); n != 0 {
		t.Errorf("%d containers were created for refused variables", n)
	}
	// Their harmless neighbours are taken.
	if _, err := m.Start(context.Background(), "ok", session.Env(map[string]string{
		"TZ": "America/New_York", "LANG": "C.UTF-8", "LC_ALL": "en_US.UTF-8", "MY_TMP_FLAG": "1",
		"OPENAI_BASE_URL": "http://x", "SSL_VERIFY": "1",
	})); err != nil {
		t.Fatalf("harmless variables refused: %v", err)
	}
}
