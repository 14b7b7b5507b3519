package opensandbox

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/server/tenant"
	"github.com/agentbox/agentbox/session"
)

// Pagination bounds of list.
const (
	defaultPageSize = 20
	maxPageSize     = 1000
)

func (h *handler) badInput(w http.ResponseWriter, err error) {
	var br *badRequest
	if errors.As(err, &br) {
		writeError(w, br.status, br.code, br.msg)
		return
	}
	writeError(w, http.StatusBadRequest, codeInvalidParameter, err.Error())
}

// create is POST /v1/sandboxes: it starts the session, then answers 202.
func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := decode(r.Body, &req, "create sandbox request", false); err != nil {
		h.badInput(w, err)
		return
	}
	opts, err := startOptions(req, h.opts.Config)
	if err != nil {
		h.badInput(w, err)
		return
	}
	t, _ := tenant.From(r.Context())
	id := newID()
	info, err := h.m.Start(r.Context(), t.SessionKey(id), opts...)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	sb := toSandbox(id, info, h.opts.Config)
	sb.Image = nil // the create response carries no startup source
	w.Header().Set("Location", "/v1/sandboxes/"+id)
	writeJSON(w, http.StatusAccepted, sb)
}

// get is GET /v1/sandboxes/{id}.
func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	id, key, ok := sandboxKey(w, r)
	if !ok {
		return
	}
	info, err := h.m.Info(r.Context(), key, session.WithoutMemoryUse())
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(id, info, h.opts.Config))
}

// list is GET /v1/sandboxes: the tenant's live sandboxes (stopped ones are
// gone from the engine, so Terminated matches none), filtered by state
// (any of them) and metadata (all pairs), newest first, one page.
func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := positiveParam(q, "page", 1, 0)
	if err != nil {
		h.badInput(w, err)
		return
	}
	size, err := positiveParam(q, "pageSize", defaultPageSize, maxPageSize)
	if err != nil {
		h.badInput(w, err)
		return
	}
	states := map[string]bool{}
	for _, s := range q["state"] {
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				states[strings.ToLower(part)] = true
			}
		}
	}
	var meta url.Values
	if m := q.Get("metadata"); m != "" {
		meta, err = url.ParseQuery(m)
		if err != nil {
			h.badInput(w, invalid("metadata %q: want key=value pairs joined by &, such as project=apollo&team=ml", truncate(m, 64)))
			return
		}
	}

	t, _ := tenant.From(r.Context())
	// Only the tenant's sessions are read, and no memory use (the wire
	// has no field for it): the list costs the same whatever other
	// tenants run.
	all, err := h.m.List(r.Context(), session.ListWithoutMemoryUse(),
		session.ListKeys(func(key string) bool { _, ok := t.Name(key); return ok }))
	if err != nil {
		h.fail(w, r, "", err)
		return
	}
	var items []sandbox
	for _, brief := range all {
		id, ok := t.Name(brief.Key)
		if !ok {
			continue
		}
		// List leaves expiry, image and metadata out; Info has them.
		info, err := h.m.Info(r.Context(), brief.Key, session.WithoutMemoryUse())
		if errors.Is(err, session.ErrNotFound) {
			continue // removed since List
		}
		if err != nil {
			h.fail(w, r, id, err)
			return
		}
		sb := toSandbox(id, info, h.opts.Config)
		if len(states) > 0 && !states[strings.ToLower(sb.Status.State)] {
			continue
		}
		if !matches(sb.Metadata, meta) {
			continue
		}
		items = append(items, sb)
	}
	slices.SortFunc(items, func(a, b sandbox) int {
		if c := time.Time(b.CreatedAt).Compare(time.Time(a.CreatedAt)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	total := len(items)
	pages := (total + size - 1) / size
	start := min((page-1)*size, total)
	end := min(start+size, total)
	resp := listResponse{
		Items: items[start:end],
		Pagination: pagination{Page: page, PageSize: size, TotalItems: total, TotalPages: pages,
			HasNextPage: end < total},
	}
	if resp.Items == nil {
		resp.Items = []sandbox{}
	}
	writeJSON(w, http.StatusOK, resp)
}

// matches reports whether md has every pair of want.
func matches(md map[string]string, want url.Values) bool {
	for k, vs := range want {
		for _, v := range vs {
			if got, ok := md[k]; !ok || got != v {
				return false
			}
		}
	}
	return true
}

// positiveParam reads an integer query parameter of at least 1 (and at most
// hi, when hi > 0).
func positiveParam(q url.Values, name string, def, hi int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || (hi > 0 && n > hi) {
		if hi > 0 {
			return 0, invalid("%s %q: want an integer from 1 to %d", name, truncate(s, 20), hi)
		}
		return 0, invalid("%s %q: want an integer of at least 1", name, truncate(s, 20))
	}
	return n, nil
}

// delete is DELETE /v1/sandboxes/{id}: the session is stopped and its
// container removed (its history stays, so get then says Terminated).
// Deleting a sandbox that has ended already answers 204 as the first
// delete did: get describes it (Terminated, Failed), so a 404 would
// contradict it, and a retried kill must not fail.
func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	id, key, ok := sandboxKey(w, r)
	if !ok {
		return
	}
	err := h.m.Stop(r.Context(), key)
	if errors.Is(err, session.ErrNotFound) {
		info, ierr := h.m.Info(r.Context(), key, session.WithoutMemoryUse())
		if ierr == nil && (info.State == session.StateStopped || info.State == session.StateLost) {
			err = nil
		}
	}
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pause is POST /v1/sandboxes/{id}/pause; the pause is done when it
// answers 202.
func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	id, key, ok := sandboxKey(w, r)
	if !ok {
		return
	}
	if err := h.m.Pause(r.Context(), key); err != nil {
		h.fail(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// resume is POST /v1/sandboxes/{id}/resume.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	id, key, ok := sandboxKey(w, r)
	if !ok {
		return
	}
	if err := h.m.Resume(r.Context(), key); err != nil {
		h.fail(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// renew is POST /v1/sandboxes/{id}/renew-expiration. The new expiry may be
// any time in the future (within SESSION_MAX_TTL_S), earlier than the
// current one included.
func (h *handler) renew(w http.ResponseWriter, r *http.Request) {
	id, key, ok := sandboxKey(w, r)
	if !ok {
		return
	}
	var req struct {
		ExpiresAt *string `json:"expiresAt"`
	}
	if err := decodeStrict(r.Body, &req, "renew request"); err != nil {
		h.badInput(w, err)
		return
	}
	if req.ExpiresAt == nil {
		h.badInput(w, &badRequest{status: http.StatusBadRequest, code: codeInvalidExpiry, msg: "expiresAt is required"})
		return
	}
	d, err := parseExpiry(*req.ExpiresAt, time.Now())
	if err != nil {
		h.badInput(w, err)
		return
	}
	expires, err := h.m.Renew(r.Context(), key, d)
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, renewResponse{ExpiresAt: wireTime(expires)})
}

// endpoint is GET /v1/sandboxes/{id}/endpoints/{port}: every port of a live
// sandbox resolves to this server's execd route for it.
func (h *handler) endpoint(w http.ResponseWriter, r *http.Request) {
	id, key, ok := sandboxKey(w, r)
	if !ok {
		return
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, codeInvalidParameter, "port "+strconv.Quote(truncate(r.PathValue("port"), 20))+": want an integer from 1 to 65535")
		return
	}
	info, err := h.m.Info(r.Context(), key, session.WithoutMemoryUse())
	if err != nil {
		h.fail(w, r, id, err)
		return
	}
	if info.State != session.StateRunning && info.State != session.StatePaused {
		writeError(w, http.StatusNotFound, codeSandboxNotFound, "sandbox "+id+" is "+strings.ToLower(status(info).State)+": it has no endpoints")
		return
	}
	host := h.opts.EndpointHost
	if host == "" {
		host = r.Host
	}
	// A token for this incarnation of the sandbox (its container), valid
	// for the token TTL from now: asking again renews it.
	t, _ := tenant.From(r.Context())
	writeJSON(w, http.StatusOK, endpointResponse{
		Endpoint: host + strings.TrimSuffix(ExecdPrefix, "/") + "/" + id,
		Headers:  map[string]string{TokenHeader: h.opts.Tokens.Issue(t, id, info.ContainerID)},
	})
}
