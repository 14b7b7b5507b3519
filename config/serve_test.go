package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/config"
)

func TestServeSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# tenants\n\nfile-key-0123456789abcdef\n  second-key-0123456789  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("good-key-0123456789abcdef\nshortkey\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const k1, k2 = "env-key-0123456789abcdef", "env-key-fedcba9876543210"
	tests := []struct {
		name    string
		env     map[string]string
		addr    string
		keys    []string
		wantErr string // substring of the load error; "" means it loads
		keysErr string // substring of the APIKeys error
	}{
		{name: "defaults", env: nil, addr: ":8080", keys: []string{}},
		{name: "token TTL", env: map[string]string{"SANDBOX_TOKEN_TTL_S": "3600"}, addr: ":8080", keys: []string{}},
		{name: "token TTL too short", env: map[string]string{"SANDBOX_TOKEN_TTL_S": "59"}, wantErr: "SANDBOX_TOKEN_TTL_S"},
		{name: "token TTL too long", env: map[string]string{"SANDBOX_TOKEN_TTL_S": "604801"}, wantErr: "SANDBOX_TOKEN_TTL_S"},
		{name: "token TTL not a number", env: map[string]string{"SANDBOX_TOKEN_TTL_S": "1h"}, wantErr: "SANDBOX_TOKEN_TTL_S"},
		{name: "address", env: map[string]string{"SERVE_ADDR": "127.0.0.1:9000"}, addr: "127.0.0.1:9000", keys: []string{}},
		{name: "bad address", env: map[string]string{"SERVE_ADDR": "8080"}, wantErr: "SERVE_ADDR"},
		{name: "bad port", env: map[string]string{"SERVE_ADDR": ":99999"}, wantErr: "SERVE_ADDR"},
		{name: "keys", env: map[string]string{"SERVE_API_KEYS": k1 + " , " + k2}, addr: ":8080", keys: []string{k1, k2}},
		{name: "short key", env: map[string]string{"SERVE_API_KEYS": k1 + ",tooshort"}, wantErr: "key 2 is shorter than 16"},
		{name: "key with space", env: map[string]string{"SERVE_API_KEYS": "has a space in the middle"}, wantErr: "spaces"},
		{name: "file", env: map[string]string{"SERVE_API_KEYS": k1, "SERVE_API_KEYS_FILE": file}, addr: ":8080",
			keys: []string{k1, "file-key-0123456789abcdef", "second-key-0123456789"}},
		{name: "missing file", env: map[string]string{"SERVE_API_KEYS_FILE": filepath.Join(dir, "nope")}, wantErr: "does not exist"},
		{name: "file is a folder", env: map[string]string{"SERVE_API_KEYS_FILE": dir}, wantErr: "not a regular file"},
		{name: "short key in file", env: map[string]string{"SERVE_API_KEYS_FILE": short}, addr: ":8080", keysErr: "line 2 is shorter than 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.FromLookup(func(n string) (string, bool) { v, ok := tt.env[n]; return v, ok })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, config.ErrInvalid) {
					t.Fatalf("load: got %v, want an ErrInvalid naming %q", err, tt.wantErr)
				}
				for _, v := range tt.env {
					if strings.Contains(err.Error(), "0123456789") && strings.Contains(v, "0123456789") {
						t.Errorf("the error shows a key: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if c.ServeAddr != tt.addr {
				t.Errorf("ServeAddr = %q, want %q", c.ServeAddr, tt.addr)
			}
			keys, err := c.APIKeys()
			if tt.keysErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.keysErr) {
					t.Fatalf("APIKeys: got %v, want an error naming %q", err, tt.keysErr)
				}
				if strings.Contains(err.Error(), "good-key") || strings.Contains(err.Error(), "shortkey") {
					t.Errorf("the error shows a key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("APIKeys: %v", err)
			}
			if strings.Join(keys, "|") != strings.Join(tt.keys, "|") {
				t.Errorf("APIKeys = %q, want %q", keys, tt.keys)
			}
			if s := c.String(); strings.Contains(s, "0123456789abcdef") || strings.Contains(s, "fedcba") {
				t.Errorf("String shows an API key:\n%s", s)
			}
		})
	}
}
