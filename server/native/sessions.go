package native

import (
	"errors"
	"net/http"

	"github.com/agentbox/agentbox/session"
)

// GET and DELETE routes answer 404 for a session that never existed (or
// is another tenant's); POST routes create the caller's session, as Exec
// does.

func (h *handler) getSession(w http.ResponseWriter, r *http.Request, c call) {
	info, err := h.m.Info(r.Context(), c.key)
	if err != nil {
		h.fail(w, r, c, err)
		return
	}
	writeJSON(w, toSessionInfo(c.name, info))
}

func (h *handler) deleteSession(w http.ResponseWriter, r *http.Request, c call) {
	if err := h.m.Stop(r.Context(), c.key); err != nil {
		h.fail(w, r, c, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// exists answers 404 itself when the session of c never existed.
func (h *handler) exists(w http.ResponseWriter, r *http.Request, c call) bool {
	_, err := h.m.Info(r.Context(), c.key, session.WithoutMemoryUse())
	if errors.Is(err, session.ErrNotFound) {
		writeJSONStatus(w, http.StatusNotFound, notFound(c))
		return false
	}
	if err != nil {
		h.fail(w, r, c, err)
		return false
	}
	return true
}

func (h *handler) getArtifacts(w http.ResponseWriter, r *http.Request, c call) {
	if !h.exists(w, r, c) {
		return
	}
	arts, err := h.m.Artifacts(r.Context(), c.key)
	if err != nil {
		h.fail(w, r, c, err)
		return
	}
	if arts == nil {
		arts = []session.Artifact{}
	}
	writeJSON(w, artifactList{Artifacts: arts})
}

func (h *handler) getDatasets(w http.ResponseWriter, r *http.Request, c call) {
	if !h.exists(w, r, c) {
		return
	}
	l, err := h.m.Datasets(r.Context(), c.key)
	if err != nil {
		h.fail(w, r, c, err)
		return
	}
	writeJSON(w, toListing(l))
}

func (h *handler) selectDataset(w http.ResponseWriter, r *http.Request, c call) {
	id := r.PathValue("id")
	if id == "" || len(id) > maxNameBytes {
		writeJSONStatus(w, http.StatusBadRequest, apiError{Code: "invalid_dataset", Message: "a dataset id is 1 to 1024 bytes"})
		return
	}
	var req selectRequest
	if !h.decode(w, r, &req, true) {
		return
	}
	var opts []session.SelectOption
	if req.Refresh {
		opts = append(opts, session.Refresh())
	}
	sel, err := h.m.SelectDataset(r.Context(), c.key, id, opts...)
	if err != nil {
		h.fail(w, r, c, err)
		return
	}
	st := toDatasetStatus(sel.Record)
	st.Path = sel.Path
	st.Fetched = &sel.Fetched
	writeJSON(w, st)
}
