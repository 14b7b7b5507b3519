package datasets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// Request is what a Fetcher is asked for: one dataset, on behalf of one
// session.
type Request struct {
	// ID is the dataset id as the model gave it: untrusted input
	// (HTTPFetcher escapes it).
	ID string
	// Namespace is the namespace of the session manager that asks.
	Namespace string
	// SessionKey is the key of the session that selects the dataset (the
	// caller's conversation or thread), for a source that authorizes per
	// user. Only under ScopeSession does every key's selection reach the
	// Fetcher; under the other scopes a dataset fetched for one key is
	// served from the cache to the others (see Scope).
	SessionKey string
	// Refresh is set when the caller asked for the dataset afresh (it may
	// have changed at its source): a source with caches of its own should
	// bypass them. HTTPFetcher sends "Cache-Control: no-cache".
	Refresh bool
}

// Fetcher returns the bytes of a dataset. The caller closes the reader.
// Ids come from a model: a Fetcher must treat them as untrusted input
// (HTTPFetcher escapes them). A Fetcher that refuses a session the dataset
// returns an error, which becomes the FAILED reason the agent reads.
type Fetcher interface {
	Fetch(ctx context.Context, req Request) (io.ReadCloser, error)
}

// FetcherFunc adapts a function to the Fetcher interface.
type FetcherFunc func(ctx context.Context, req Request) (io.ReadCloser, error)

// Fetch calls f(ctx, req).
func (f FetcherFunc) Fetch(ctx context.Context, req Request) (io.ReadCloser, error) {
	return f(ctx, req)
}

// BytesFetcher returns a Fetcher over a function that returns a dataset's
// whole content, for sources that are small or already in memory.
func BytesFetcher(fn func(ctx context.Context, req Request) ([]byte, error)) Fetcher {
	return FetcherFunc(func(ctx context.Context, req Request) (io.ReadCloser, error) {
		b, err := fn(ctx, req)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}

// DefaultHTTPTimeout is the default HTTPFetcher.Timeout: five minutes, enough
// for a 1 GiB dataset at about 3.5 MB/s.
const DefaultHTTPTimeout = 5 * time.Minute

// Headers HTTPFetcher sends to say which session asks for a dataset, so the
// source can authorize it. Their values are percent-encoded as the id is in
// the URL (any key is a valid header value that way).
const (
	HeaderNamespace  = "Agentbox-Namespace"
	HeaderSessionKey = "Agentbox-Session-Key"
)

// HTTPFetcher fetches a dataset with an HTTP GET. Its requests carry the
// asking session's namespace and key in HeaderNamespace and
// HeaderSessionKey (when not empty). Its errors are
// *FetchError values naming the cause: the HTTP status (with the start of
// the answer's body), a timeout, or a size over MaxBytes. It is safe for
// concurrent use; its fields must not change after the first Fetch.
type HTTPFetcher struct {
	// URLTemplate is the URL to get, with "{id}" standing for the dataset id,
	// e.g. "https://api.example.com/datasets/{id}/content". The id is
	// percent-encoded except for A-Z a-z 0-9 - . _ ~ (and "." or ".." wholly
	// encoded), so it cannot add path segments, query parameters or a
	// fragment wherever the template puts it. Required.
	URLTemplate string
	// Token is sent as "Authorization: Bearer <Token>"; empty sends none.
	Token string
	// Timeout bounds a whole fetch, reading the body included; default
	// DefaultHTTPTimeout.
	Timeout time.Duration
	// MaxBytes, when positive, rejects an answer whose Content-Length says it
	// is larger and stops reading a body that grows past it, with ErrTooLarge.
	// Cache.Get enforces its own limit regardless; this one fails earlier.
	MaxBytes int64
	// Client sends the requests; default http.DefaultClient. Timeout is
	// applied through the request context, so the client needs none.
	Client *http.Client
}

// errHTTPTimeout is the cause of an HTTPFetcher's own deadline, telling it
// apart from the caller's.
var errHTTPTimeout = errors.New("http fetch timeout")

// Fetch gets the dataset req.ID. The returned body stops with a *FetchError
// when the timeout expires or MaxBytes is passed while it is read.
func (h *HTTPFetcher) Fetch(ctx context.Context, r Request) (io.ReadCloser, error) {
	id := r.ID
	if err := checkID(id); err != nil {
		return nil, &FetchError{ID: id, Err: err}
	}
	if !strings.Contains(h.URLTemplate, "{id}") {
		return nil, &FetchError{ID: id, Err: errors.New(`URL template has no "{id}"`)}
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultHTTPTimeout
	}
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errHTTPTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.ReplaceAll(h.URLTemplate, "{id}", escapeID(id)), nil)
	if err != nil {
		cancel()
		return nil, &FetchError{ID: id, Err: err}
	}
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	if r.Namespace != "" {
		req.Header.Set(HeaderNamespace, escapeID(r.Namespace))
	}
	if r.SessionKey != "" {
		req.Header.Set(HeaderSessionKey, escapeID(r.SessionKey))
	}
	if r.Refresh {
		req.Header.Set("Cache-Control", "no-cache")
	}
	resp, err := client.Do(req)
	if err != nil {
		err = h.cause(ctx, id, err, timeout)
		cancel()
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		detail := bodySnippet(resp.Body)
		resp.Body.Close()
		cancel()
		var cause error
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			cause = ErrNotFound
			if detail != "" {
				cause = fmt.Errorf("%w: %s", ErrNotFound, detail)
			}
		case detail != "":
			cause = errors.New(detail)
		default:
			cause = errors.New(strings.ToLower(http.StatusText(resp.StatusCode)))
		}
		return nil, &FetchError{ID: id, Status: resp.StatusCode, Err: cause}
	}
	if h.MaxBytes > 0 && resp.ContentLength > h.MaxBytes {
		resp.Body.Close()
		cancel()
		return nil, &FetchError{ID: id, Err: tooLarge(resp.ContentLength, h.MaxBytes)}
	}
	return &httpBody{h: h, ctx: ctx, cancel: cancel, id: id, body: resp.Body, timeout: timeout}, nil
}

// cause turns a transport or body error into a *FetchError saying whether
// the fetcher's own timeout expired.
func (h *HTTPFetcher) cause(ctx context.Context, id string, err error, timeout time.Duration) error {
	if errors.Is(context.Cause(ctx), errHTTPTimeout) {
		return &FetchError{ID: id, Err: fmt.Errorf("timed out after %v: %w", timeout, context.DeadlineExceeded)}
	}
	return &FetchError{ID: id, Err: err}
}

// httpBody is a response body that enforces MaxBytes, names its errors and
// releases the request's timer when closed.
type httpBody struct {
	h       *HTTPFetcher
	ctx     context.Context
	cancel  context.CancelFunc
	id      string
	body    io.ReadCloser
	timeout time.Duration
	n       int64
}

func (b *httpBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.n += int64(n)
	if b.h.MaxBytes > 0 && b.n > b.h.MaxBytes {
		return n, &FetchError{ID: b.id, Err: tooLarge(b.n, b.h.MaxBytes)}
	}
	if err != nil && err != io.EOF {
		return n, b.h.cause(b.ctx, b.id, err, b.timeout)
	}
	return n, err
}

func (b *httpBody) Close() error {
	err := b.body.Close()
	b.cancel()
	return err
}

// tooLarge is the cause of a dataset over the limit; size is a lower bound.
func tooLarge(size, limit int64) error {
	return fmt.Errorf("%w: at least %s, limit %s", ErrTooLarge, formatBytes(size), formatBytes(limit))
}

// escapeID percent-encodes all but the unreserved characters of RFC 3986,
// which is stricter than url.PathEscape (it keeps & = + : @ $), so the id
// stays one value in a path or a query. An id of only dots is encoded
// wholly: "." and ".." would be path segments with a meaning.
func escapeID(id string) string {
	if strings.Trim(id, ".") == "" {
		return strings.Repeat("%2E", len(id))
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := range len(id) {
		c := id[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// bodySnippet returns the start of an error answer as one printable line of
// at most 200 bytes: enough to say why, too little to flood a status reason.
func bodySnippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.ToValidUTF8(string(b), ""))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "..."
	}
	return s
}
