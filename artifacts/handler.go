package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// ArtifactGetter is what a Handler needs from an artifact index: *Index
// has it, and so can an in-memory fake.
type ArtifactGetter interface {
	// Get returns the artifact with the id, or an error matching
	// ErrNotFound.
	Get(ctx context.Context, id string) (Artifact, error)
}

// BlobOpener is what a Handler needs from a blobstore: *Blobstore has it.
type BlobOpener interface {
	// Open opens the blob with the hex SHA-256 for reading, or returns an
	// error matching ErrBlobMissing.
	Open(sha256 string) (io.ReadSeekCloser, error)
}

// DownloadPath is the path prefix of download URLs: a download is
// GET <base>/artifacts/<id>?token=<token>.
const DownloadPath = "/artifacts/"

// csp is sent with every response. "sandbox" makes a browser treat anything
// it does display as a unique, script-less origin, and default-src 'none'
// stops it loading anything, so an HTML or SVG artifact opened by hand can
// never act on this origin.
const csp = "sandbox; default-src 'none'"

// blobRetryDelay is how long a download waits before it opens a missing
// blob a second time.
const blobRetryDelay = 50 * time.Millisecond

// Handler serves artifact downloads: GET and HEAD /artifacts/{id}?token=...
// with ranges, ETag and conditional requests, and GET /healthz. Every error
// is JSON, {"error": {"code": "...", "message": "..."}}, with one of the
// stable codes token_missing, token_invalid, token_expired (401),
// token_wrong_artifact (403), not_found (404), method_not_allowed (405),
// gone (410, content missing from the blobstore) and internal (500); the
// one exception is 416 for an unsatisfiable range, whose short text body and
// Content-Range header come from http.ServeContent.
//
// It expects to see paths from the root; mount it under a prefix with
// http.StripPrefix. A Handler is safe for concurrent use.
type Handler struct {
	index  ArtifactGetter
	blobs  BlobOpener
	signer *Signer
	closer io.Closer // the database Open opened; nil from NewHandler
	log    *slog.Logger
	now    func() time.Time
	mux    *http.ServeMux

	// gone remembers the ids whose missing blob was already logged, so a
	// client retrying a download cannot flood the log. Only ids with a
	// genuine token reach it, which bounds it by the artifacts signed.
	gone sync.Map
}

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithHandlerLogger sets the logger for missing blobs and internal errors;
// the default discards them.
func WithHandlerLogger(l *slog.Logger) HandlerOption {
	return func(h *Handler) {
		if l != nil {
			h.log = l
		}
	}
}

// WithHandlerClock sets the clock tokens are checked against; the default
// is time.Now.
func WithHandlerClock(now func() time.Time) HandlerOption {
	return func(h *Handler) {
		if now != nil {
			h.now = now
		}
	}
}

// NewHandler returns a Handler serving the artifacts of index from blobs
// (an *Index and a *Blobstore, or fakes with their Get and Open methods) to
// holders of tokens from signer. It panics if any of the three is nil, a
// programming error like registering a nil http.Handler. Open builds one
// from a config.Config instead.
func NewHandler(index ArtifactGetter, blobs BlobOpener, signer *Signer, opts ...HandlerOption) *Handler {
	if index == nil || blobs == nil || signer == nil {
		panic("artifacts: NewHandler needs an index, a blobstore and a signer")
	}
	h := &Handler{
		index:  index,
		blobs:  blobs,
		signer: signer,
		log:    slog.New(slog.DiscardHandler),
		now:    time.Now,
		mux:    http.NewServeMux(),
	}
	for _, o := range opts {
		o(h)
	}
	// A GET pattern also matches HEAD. The method-less patterns catch the
	// other methods so that 405 and 404 are JSON too, not the mux's text.
	h.mux.HandleFunc("GET "+DownloadPath+"{id}", h.download)
	h.mux.HandleFunc(DownloadPath+"{id}", methodNotAllowed)
	h.mux.HandleFunc("GET /healthz", healthz)
	h.mux.HandleFunc("/healthz", methodNotAllowed)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	// The token is in the URL; keep it out of Referer headers.
	hdr.Set("Referrer-Policy", "no-referrer")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	token := r.URL.Query().Get("token")
	if token == "" {
		writeTokenError(w, http.StatusUnauthorized, "token_missing",
			"a download token is required: use the full download URL, with its ?token= parameter")
		return
	}
	// The token is checked before the index is asked, so that without a
	// token nobody learns which ids exist.
	now := h.now()
	claims, err := h.signer.Verify(token, id, now)
	switch {
	case errors.Is(err, ErrTokenExpired):
		writeTokenError(w, http.StatusUnauthorized, "token_expired",
			"the download token has expired; ask for a new download URL")
		return
	case errors.Is(err, ErrTokenWrongArtifact):
		writeError(w, http.StatusForbidden, "token_wrong_artifact",
			"the download token is for another artifact")
		return
	case err != nil:
		writeTokenError(w, http.StatusUnauthorized, "token_invalid", "the download token is invalid")
		return
	}

	a, err := h.index.Get(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no artifact has this id")
		return
	}
	if err != nil {
		h.internal(w, r, id, "look up artifact", err)
		return
	}
	f, err := h.blobs.Open(a.SHA256)
	if errors.Is(err, ErrBlobMissing) {
		// A garbage collection moves a blob aside for an instant while it
		// checks the index, and puts a referenced one back; one late retry
		// keeps that from turning into a 410.
		select {
		case <-time.After(blobRetryDelay):
			f, err = h.blobs.Open(a.SHA256)
		case <-r.Context().Done():
		}
	}
	if errors.Is(err, ErrBlobMissing) {
		if _, logged := h.gone.LoadOrStore(id, struct{}{}); !logged {
			h.log.Warn("artifact content missing from the blobstore",
				"artifact_id", id, "sha256", a.SHA256, "error", err)
		}
		writeError(w, http.StatusGone, "gone", "the artifact's content is no longer stored")
		return
	}
	if err != nil {
		h.internal(w, r, id, "open blob", err)
		return
	}
	defer f.Close()

	hdr := w.Header()
	hdr.Set("Content-Type", contentType(a.MIME))
	hdr.Set("Content-Disposition", contentDisposition(a.Name))
	hdr.Set("ETag", `"`+a.SHA256+`"`)
	// Caches may keep the response only as long as the URL stays valid.
	left := max(int64(claims.Expires.Sub(now)/time.Second), 0)
	hdr.Set("Cache-Control", "private, max-age="+strconv.FormatInt(left, 10))
	if r.Header.Get("Range") != "" {
		if r, err = fixRange(r, f); err != nil {
			h.internal(w, r, id, "size blob", err)
			return
		}
	}
	// ServeContent does ranges (206, 416), HEAD, If-None-Match against the
	// ETag above and If-Modified-Since against Created.
	http.ServeContent(w, r, "", a.Created, f)
}

// fixRange returns r with its Range header changed where http.ServeContent
// would answer it wrongly. A zero-length suffix range ("-0") selects
// nothing (RFC 9110, section 14.1.1), yet ServeContent serves it as an
// inverted range, 206 with "bytes 22-21/22", and serves any suffix range of
// an empty file as "bytes 0--1/0". So "-0" specs are dropped, and when no
// other spec is left the header becomes one ServeContent itself answers 416
// with "Content-Range: bytes */size"; an empty artifact loses the header
// and is served whole, as ServeContent already does for its other ranges.
// Rewriting the header rather than answering here keeps ServeContent's
// order of checks: a matching If-None-Match still gets 304, a stale
// If-Range still gets the whole artifact.
func fixRange(r *http.Request, content io.Seeker) (*http.Request, error) {
	size, err := content.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = content.Seek(0, io.SeekStart)
	}
	if err != nil {
		return r, err
	}
	spec, changed := rangeWithoutZeroSuffix(r.Header.Get("Range"), size)
	if !changed {
		return r, nil
	}
	// Handlers must not modify the request they were given.
	r2 := new(http.Request)
	*r2 = *r
	r2.Header = r.Header.Clone()
	if spec == "" {
		r2.Header.Del("Range")
	} else {
		r2.Header.Set("Range", spec)
	}
	return r2, nil
}

// rangeWithoutZeroSuffix returns the Range header value hdr for content of
// size bytes without its zero-length suffix ranges, and whether that
// changed it: "" for an empty artifact, and "bytes=<size>-", which
// overlaps nothing, when only such ranges were there. A header that is not
// a byte range set is left to ServeContent.
func rangeWithoutZeroSuffix(hdr string, size int64) (string, bool) {
	if size == 0 {
		return "", true
	}
	const unit = "bytes="
	if !strings.HasPrefix(hdr, unit) {
		return hdr, false
	}
	specs := strings.Split(hdr[len(unit):], ",")
	kept, left := specs[:0], 0
	for _, s := range specs {
		start, end, ok := strings.Cut(s, "-")
		if ok && strings.TrimSpace(start) == "" && isZero(strings.TrimSpace(end)) {
			continue
		}
		kept = append(kept, s)
		if strings.TrimSpace(s) != "" {
			left++
		}
	}
	switch {
	case len(kept) == len(specs):
		return hdr, false
	case left == 0:
		return unit + strconv.FormatInt(size, 10) + "-", true
	}
	return unit + strings.Join(kept, ","), true
}

// isZero reports whether s is a number written with zeros only.
func isZero(s string) bool {
	return s != "" && strings.Trim(s, "0") == ""
}

// internal logs err and answers 500 without telling the client why.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, id, op string, err error) {
	if r.Context().Err() == nil {
		h.log.Error("artifact download: "+op, "artifact_id", id, "error", err)
	}
	writeError(w, http.StatusInternalServerError, "internal", "internal error")
}

func healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "only GET and HEAD are allowed")
}

// writeTokenError is writeError for 401s, which carry the challenge RFC 9110
// asks of them.
func writeTokenError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+Audience+`", error="invalid_token"`)
	writeError(w, status, code, msg)
}

// writeError sends the JSON error body every failure has.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, msg
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// contentType returns the artifact's MIME type if it is well formed, so that
// a bad index entry cannot put arbitrary text into the header.
func contentType(t string) string {
	if _, _, err := mime.ParseMediaType(t); err != nil || strings.ContainsAny(t, "\r\n") {
		return "application/octet-stream"
	}
	return t
}

// contentDisposition makes the artifact a download under its base name
// (RFC 6266): filename= is a quoted ASCII stand-in for old clients, with
// quotes, backslashes, percent signs, control and non-ASCII characters
// replaced by "_", and filename*= is the name, percent-encoded UTF-8
// (RFC 8187), with the characters hiddenRune names replaced by "_" first.
func contentDisposition(name string) string {
	base := path.Base(name)
	if base == "." || base == "/" || base == ".." {
		base = "artifact"
	}
	base = strings.ToValidUTF8(base, "\uFFFD")
	// The sandbox chose the name: a right-to-left override would make
	// "invoice\u202Efdp.exe" show as "invoiceexe.pdf" in a download bar. A
	// visible stand-in, rather than nothing, keeps the name's length and
	// shows that something was there.
	base = strings.Map(func(r rune) rune {
		if hiddenRune(r) {
			return '_'
		}
		return r
	}, base)
	var b strings.Builder
	b.WriteString(`attachment; filename="`)
	for _, r := range base {
		// % is replaced too: some clients percent-decode filename=.
		if r < 0x20 || r >= 0x7f || r == '"' || r == '\\' || r == '%' {
			b.WriteByte('_')
		} else {
			b.WriteRune(r)
		}
	}
	b.WriteString(`"; filename*=UTF-8''`)
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(base); i++ {
		if c := base[i]; isAttrChar(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return b.String()
}

// hiddenRune reports whether r must not reach a file name a person reads:
// controls (Cc, C0 and C1 and DEL), format characters (Cf: the bidi
// embeddings, overrides, isolates and marks, zero-width characters, tags)
// and the line and paragraph separators, which reorder, hide or break the
// text around them.
func hiddenRune(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// isAttrChar reports whether c may appear unencoded in an RFC 8187 value.
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}

// URL returns the download URL of artifact id with token, on base (the
// public URL of the server, ARTIFACT_PUBLIC_URL): base/artifacts/id?token=token.
func URL(base, id, token string) string {
	return strings.TrimRight(base, "/") + DownloadPath + url.PathEscape(id) + "?token=" + url.QueryEscape(token)
}

// URL signs a token for artifact id at now and returns its download URL on
// base, and when it expires.
func (s *Signer) URL(base, id string, now time.Time) (string, time.Time, error) {
	token, exp, err := s.Sign(id, now)
	if err != nil {
		return "", time.Time{}, err
	}
	return URL(base, id, token), exp, nil
}
