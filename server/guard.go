package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

// Policy is what the server checks of every request before an API sees it.
// The zero Policy is a server with API keys, no extra host names, no
// /metrics key, DefaultBodyTimeout and no body cap.
type Policy struct {
	// Keyless: the server has no API key, so whoever reaches it is a
	// tenant; only requests naming a loopback host or one of Hosts are
	// answered (a web page that rebinds its own name to 127.0.0.1 names
	// its own host).
	Keyless bool
	// Hosts are more host names (no port) a keyless server answers
	// (SERVE_ALLOWED_HOSTS, the host of SERVE_ADDR and of
	// ARTIFACT_PUBLIC_URL).
	Hosts []string
	// MetricsKey is the bearer token /metrics needs on a server with keys
	// (SERVE_METRICS_KEY); empty: a server with keys refuses /metrics.
	MetricsKey string
	// MaxBody caps every request body; 0 means no cap.
	MaxBody int64
	// BodyTimeout is how long a body may take beyond what its size needs
	// at MinBodyRate; 0 means DefaultBodyTimeout.
	BodyTimeout time.Duration
}

// refusal is a request the guard turns away before any API sees it.
type refusal struct {
	status        int
	code, message string
}

// check returns why r is refused, or nil. The rules cost nothing to an SDK
// client (it sends JSON, and no Origin or Sec-Fetch-Site) and stop what a
// browser sends on a page's behalf:
//   - a "simple" cross-site request needs no preflight when its
//     Content-Type is text/plain, a form, or absent: every body but an
//     upload's must say application/json, which a page can send to another
//     origin only after a preflight this server never grants;
//   - a request a browser marks as coming from another origin
//     (Origin, Sec-Fetch-Site) is refused, but for artifact downloads,
//     whose links are opened from chat pages and carry their own token;
//   - without keys, DNS rebinding: the page's own name, resolved to
//     127.0.0.1, is in Host; only loopback names and configured ones pass.
func (p Policy) check(r *http.Request) *refusal {
	if p.Keyless && !p.hostAllowed(r.Host) {
		return &refusal{http.StatusForbidden, "HOST_NOT_ALLOWED",
			"this server has no API key and answers only loopback host names (localhost, 127.0.0.1, [::1]) and SERVE_ALLOWED_HOSTS; the request named " + quoteHost(r.Host)}
	}
	download := (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, artifacts.DownloadPath)
	if !download {
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			return &refusal{http.StatusForbidden, "CROSS_ORIGIN_REFUSED",
				"requests from web pages of another origin are refused (Origin " + quoteHost(o) + "); call this server from a backend"}
		}
		switch strings.ToLower(r.Header.Get("Sec-Fetch-Site")) {
		case "cross-site", "same-site":
			return &refusal{http.StatusForbidden, "CROSS_ORIGIN_REFUSED",
				"requests from web pages of another origin are refused (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + "); call this server from a backend"}
		}
	}
	if hasBody(r) {
		want := "application/json"
		if r.Method == http.MethodPost && isUpload(r.URL.Path) {
			want = "multipart/form-data"
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		ok := err == nil && (mt == want || (want == "application/json" && strings.HasSuffix(mt, "+json")))
		if !ok {
			got := r.Header.Get("Content-Type")
			if got == "" {
				got = "none"
			}
			return &refusal{http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE",
				"send the body as " + want + " (Content-Type: " + quoteHost(got) + ")"}
		}
	}
	return nil
}

// hasBody reports whether r carries a body (a length, or chunks).
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
}

// isUpload reports whether path is execd's multipart upload route,
// /execd/{id}/files/upload.
func isUpload(path string) bool {
	rest, ok := strings.CutPrefix(path, "/execd/")
	if !ok {
		return false
	}
	id, route, _ := strings.Cut(rest, "/")
	return id != "" && route == "files/upload"
}

// hostName is the name of a Host header or URL host, without its port or
// brackets, lower case, without a trailing dot.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func (p Policy) hostAllowed(hostport string) bool {
	h := hostName(hostport)
	if h == "" {
		return false
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true // RFC 6761: browsers resolve these to loopback themselves
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range p.Hosts {
		if hostName(a) == h {
			return true
		}
	}
	return false
}

// sameOrigin reports whether the Origin header origin names the host and
// port the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (sandboxed frames, file: pages) among them
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	return hostName(u.Host) == hostName(host) && portOr(u.Host, def) == portOr(host, def)
}

func portOr(hostport, def string) string {
	if _, port, err := net.SplitHostPort(hostport); err == nil && port != "" {
		return port
	}
	return def
}

// quoteHost quotes what a client sent for a message, at most 100 bytes.
func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strconv.Quote(s)
}

// metrics is the answer to a /metrics request under p: nil to serve.
func (p Policy) metrics(r *http.Request) *refusal {
	if p.Keyless {
		return nil // loopback only, and every client is the one tenant
	}
	if p.MetricsKey == "" {
		return &refusal{http.StatusForbidden, "METRICS_KEY_NOT_SET",
			"/metrics counts every tenant's work: a server with API keys serves it only with SERVE_METRICS_KEY set (send Authorization: Bearer <that key>)"}
	}
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(p.MetricsKey))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return &refusal{http.StatusUnauthorized, "UNAUTHORIZED", "/metrics needs Authorization: Bearer <SERVE_METRICS_KEY>"}
	}
	return nil
}
