package config_test

import (
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/config"
)

func ExampleFromLookup() {
	// In a program, config.Load() reads .env and the process environment;
	// FromLookup takes any source, here a map.
	vars := map[string]string{
		"SESSION_STORAGE":   "bind",
		"SANDBOX_MEMORY_MB": "2048",
		"EXEC_TIMEOUT_S":    "30",
	}
	cfg, err := config.FromLookup(func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.SessionStorage, cfg.MemoryMB, cfg.ExecTimeout, cfg.Network, cfg.ReadOnlyRoot)
	// Output: BIND 2048 30s none true
}

func ExampleFromLookup_errors() {
	vars := map[string]string{
		"SESSION_STORAGE":       "RAM",
		"TMPFS_SIZE_MB":         "lots",
		"ARTIFACT_TOKEN_SECRET": "not-long-enough",
	}
	_, err := config.FromLookup(func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	fmt.Println(err)

	var ve *config.VarError
	if errors.As(err, &ve) {
		fmt.Println("first bad variable:", ve.Name)
	}
	// Output:
	// SESSION_STORAGE="RAM": want TMPFS or BIND
	// TMPFS_SIZE_MB="lots": want an integer ≥ 16
	// ARTIFACT_TOKEN_SECRET=<redacted, 15 chars>: want at least 32 characters
	// first bad variable: SESSION_STORAGE
}
