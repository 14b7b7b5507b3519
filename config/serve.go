package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// MinAPIKeyLen is the shortest API key agentbox serve accepts: a key is a
// password, and a short one can be guessed.
const MinAPIKeyLen = 16

// maxAPIKeysFile bounds SERVE_API_KEYS_FILE, which holds a few lines.
const maxAPIKeysFile = 1 << 20

const (
	wantAPIKeys     = "comma-separated API keys of at least 16 characters each, without spaces"
	wantAPIKeysFile = "an existing file of API keys, one per line"
	wantHosts       = "comma-separated host names or IP addresses, without ports"
	wantMetricsKey  = "a key of at least 16 characters without spaces"
)

// serveSpecs are the variables of agentbox serve, last in example.env.
func serveSpecs() []spec {
	return []spec{
		{
			name: "SERVE_ADDR", def: ":8080", want: wantAddr,
			help: "listen address of agentbox serve; with no API key, one without a host listens on loopback only and a host beyond loopback is refused",
			set:  func(c *Config, v string) bool { c.ServeAddr = v; return true },
			get:  func(c Config) string { return c.ServeAddr },
			check: func(c Config) string {
				_, port, err := net.SplitHostPort(c.ServeAddr)
				if err != nil {
					return wantAddr
				}
				if _, err := strconv.ParseUint(port, 10, 16); err != nil {
					return wantAddr
				}
				return ""
			},
		},
		{
			name: "SERVE_API_KEYS", def: "", secret: true, want: wantAPIKeys,
			help: "API keys agentbox serve accepts, comma-separated; each key is a tenant that sees only its own sandboxes",
			set:  func(c *Config, v string) bool { c.ServeAPIKeys = splitList(v); return true },
			get:  func(c Config) string { return strings.Join(c.ServeAPIKeys, ",") },
			check: func(c Config) string {
				for i, k := range c.ServeAPIKeys {
					if w := checkAPIKey(k); w != "" {
						return wantAPIKeys + " (key " + strconv.Itoa(i+1) + " is " + w + ")"
					}
				}
				return ""
			},
		},
		{
			name: "SERVE_API_KEYS_FILE", def: "", want: wantAPIKeysFile,
			help: "file of more API keys for agentbox serve, one per line (# comments and blank lines skipped), read at start",
			set:  func(c *Config, v string) bool { c.ServeAPIKeysFile = v; return true },
			get:  func(c Config) string { return c.ServeAPIKeysFile },
			check: func(c Config) string {
				if c.ServeAPIKeysFile == "" {
					return ""
				}
				info, err := os.Stat(c.ServeAPIKeysFile)
				switch {
				case errors.Is(err, fs.ErrNotExist):
					return wantAPIKeysFile + " (" + c.ServeAPIKeysFile + " does not exist)"
				case err != nil:
					return wantAPIKeysFile + " (" + pathErr(err) + ")"
				case !info.Mode().IsRegular():
					return wantAPIKeysFile + " (" + c.ServeAPIKeysFile + " is not a regular file)"
				}
				return ""
			},
		},
		{
			name: "SERVE_ALLOWED_HOSTS", def: "", want: wantHosts,
			help: "more host names a server without API keys answers (besides loopback names and its listen address), comma-separated",
			set:  func(c *Config, v string) bool { c.ServeAllowedHosts = splitList(v); return true },
			get:  func(c Config) string { return strings.Join(c.ServeAllowedHosts, ",") },
			check: func(c Config) string {
				for _, h := range c.ServeAllowedHosts {
					if !hostNameRE.MatchString(h) {
						return wantHosts + " (" + strconv.Quote(h) + " is not)"
					}
				}
				return ""
			},
		},
		intSpec("SERVE_MAX_CONNS_PER_CLIENT", "connections one client address (an IPv6 client's /64) may hold open at once; 0 means no cap", 256, 0, math.MaxInt,
			func(c *Config) *int { return &c.ServeMaxConnsPerClient }),
		{
			name: "SERVE_METRICS_KEY", def: "", secret: true, want: wantMetricsKey,
			help: "bearer token GET /metrics needs when API keys are set; empty: /metrics is served only by a server without keys",
			set:  func(c *Config, v string) bool { c.ServeMetricsKey = v; return true },
			get:  func(c Config) string { return c.ServeMetricsKey },
			check: func(c Config) string {
				if c.ServeMetricsKey != "" && checkAPIKey(c.ServeMetricsKey) != "" {
					return wantMetricsKey
				}
				return ""
			},
		},
		durationSpec("SANDBOX_TOKEN_TTL_S", "lifetime of a per-sandbox execd access token, in seconds; asking for the endpoint again renews it",
			86400, 60, 604800, "", func(c *Config) *time.Duration { return &c.SandboxTokenTTL }),
	}
}

// hostNameRE is a DNS name or an IP literal, as the Host header carries it
// without its port.
var hostNameRE = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)$`)

// checkAPIKey returns "" for an acceptable key, else what is wrong with it
// (never the key itself).
func checkAPIKey(k string) string {
	if len([]rune(k)) < MinAPIKeyLen {
		return "shorter than " + strconv.Itoa(MinAPIKeyLen) + " characters"
	}
	if strings.IndexFunc(k, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return "holding spaces or control characters"
	}
	return ""
}

// APIKeys returns the API keys agentbox serve accepts: SERVE_API_KEYS, then
// the lines of SERVE_API_KEYS_FILE (read now, so a changed file reaches a
// server when it restarts). Errors name the variable and the line, never a
// key. No keys and no error means none is configured.
func (c Config) APIKeys() ([]string, error) {
	keys := make([]string, 0, len(c.ServeAPIKeys))
	for i, k := range c.ServeAPIKeys {
		if w := checkAPIKey(k); w != "" {
			return nil, &VarError{Name: "SERVE_API_KEYS", Value: redacted(k), Want: wantAPIKeys + " (key " + strconv.Itoa(i+1) + " is " + w + ")", Secret: true}
		}
		keys = append(keys, k)
	}
	if c.ServeAPIKeysFile == "" {
		return keys, nil
	}
	bad := func(why string) error {
		return &VarError{Name: "SERVE_API_KEYS_FILE", Value: c.ServeAPIKeysFile, Want: wantAPIKeysFile + " (" + why + ")"}
	}
	f, err := os.Open(c.ServeAPIKeysFile)
	if err != nil {
		return nil, bad(pathErr(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, bad(pathErr(err))
	}
	if !info.Mode().IsRegular() {
		return nil, bad("not a regular file")
	}
	if info.Size() > maxAPIKeysFile {
		return nil, bad("larger than 1 MiB")
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if w := checkAPIKey(line); w != "" {
			return nil, bad(fmt.Sprintf("the key on line %d is %s", n, w))
		}
		keys = append(keys, line)
	}
	if err := sc.Err(); err != nil {
		return nil, bad(err.Error())
	}
	return keys, nil
}
