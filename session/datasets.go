package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"go.opentelemetry.io/otel/codes"
)

// DatasetsDir is where selected datasets are staged in a session.
const DatasetsDir = "/session/data"

// DatasetsFile is the BIND-mode record of a session's datasets (the name
// LangGraph-Sandbox uses).
const DatasetsFile = "cache_datasets.json"

// ErrNoDatasetSource means the configuration offers no such datasets: API
// selection without DATASET_ACCESS=API or HYBRID, or without a fetcher.
var ErrNoDatasetSource = errors.New("dataset source not configured")

// WithFetcher supplies the fetcher of API and HYBRID datasets (by default,
// the built-in HTTP fetcher when DATASETS_API_URL is set).
func WithFetcher(f datasets.Fetcher) Option {
	return func(m *Manager) error { m.fetcher = f; return nil }
}

func (m *Manager) openDatasets() {
	// Validated by config; an unknown scope would count as the narrowest.
	scope, _ := datasets.ParseScope(m.cfg.DatasetCacheScope)
	m.dsCache = datasets.NewCache(m.art.blobs, m.store, datasets.WithScope(scope))
	m.dsStatus = datasets.NewStatuses(m.store)
	if m.fetcher == nil && m.cfg.DatasetsAPIURL != "" {
		m.fetcher = &datasets.HTTPFetcher{URLTemplate: m.cfg.DatasetsAPIURL, Token: m.cfg.DatasetsAPIToken, Timeout: m.cfg.DatasetsAPITimeout}
	}
}

// Selection is the outcome of staging a dataset into a session.
type Selection struct {
	datasets.Record
	Path    string // where code reads it, /session/data/<name>
	Fetched bool   // fetched now (false: staged from the cache, or already loaded)
}

// SelectOption changes one SelectDataset call (Refresh). The zero
// SelectOption changes nothing.
type SelectOption struct{ apply func(*selectOptions) }

type selectOptions struct {
	refresh bool
}

// Refresh fetches the dataset from its source again, even when the session
// loaded it or the cache holds it (it changed at its source). The fetcher
// sees datasets.Request.Refresh; the new content replaces the session's
// file and the cached copy the sessions of its scope share
// (DATASET_CACHE_SCOPE). A refresh that fails is FAILED, and leaves the
// file loaded before in place.
func Refresh() SelectOption { return SelectOption{func(o *selectOptions) { o.refresh = true }} }

// SelectDataset stages dataset id, fetched through the API source, into the
// session of key at /session/data/<name> (name derived safely from the id),
// recording PENDING, then LOADED or FAILED with the reason. A dataset
// already loaded in the session is left as it is (unless Refresh); one
// fetched before by a session that shares the cache with this one
// (DATASET_CACHE_SCOPE: every session, those of the namespace, or this key
// only) comes from the host-side cache. The fetcher is told the namespace
// and key (datasets.Request). A failed fetch is not a Go error: the
// returned status says FAILED and why.
func (m *Manager) SelectDataset(ctx context.Context, key, id string, opts ...SelectOption) (_ Selection, err error) {
	ctx, span := m.startSpan(ctx, SpanDataset, key, AttrDatasetID.String(id))
	defer func() { endSpan(span, err) }()
	var o selectOptions
	for _, opt := range opts {
		if opt.apply != nil {
			opt.apply(&o)
		}
	}
	if err := m.begin(); err != nil {
		return Selection{}, err
	}
	defer m.calls.Done()
	if !m.cfg.DatasetAccess.UsesAPI() {
		return Selection{}, fmt.Errorf("%w: DATASET_ACCESS=%s fetches nothing (API or HYBRID do)", ErrNoDatasetSource, m.cfg.DatasetAccess)
	}
	if m.fetcher == nil {
		return Selection{}, fmt.Errorf("%w: set DATASETS_API_URL or pass session.WithFetcher", ErrNoDatasetSource)
	}
	name, err := datasets.SafeName(id)
	if err != nil {
		return Selection{}, fmt.Errorf("select dataset: %w", err)
	}
	e, release, err := m.acquire(ctx, key, true)
	if err != nil {
		return Selection{}, err
	}
	defer release()
	sel := Selection{Path: path.Join(DatasetsDir, name)}
	rec := datasets.Record{Namespace: m.ns, SessionID: e.id, DatasetID: id, Name: name}
	if old, err := m.dsStatus.Get(ctx, m.ns, e.id, id); err == nil && !o.refresh && old.Status == datasets.StatusLoaded && m.staged(ctx, e, name, old.Size) {
		sel.Record = old
		span.SetAttributes(AttrDatasetStatus.String(string(old.Status)))
		m.metrics.datasetFetched("present")
		return sel, nil
	}
	rec.Status = datasets.StatusPending
	m.setStatus(ctx, e, rec)

	req := datasets.Request{ID: id, Namespace: m.ns, SessionKey: key, Refresh: o.refresh}
	sha, size, fetched, err := m.dsCache.Get(ctx, req, m.fetcher, int64(m.cfg.DatasetMaxMB)<<20)
	if err == nil {
		var f io.ReadSeekCloser
		if f, err = m.art.blobs.Open(sha); err == nil {
			sctx, sspan := m.startSpan(ctx, SpanStage, key, AttrDatasetID.String(id), AttrBytes.Int64(size))
			_, err = m.stage(sctx, e, "data", name, f)
			endSpan(sspan, err)
			f.Close()
		}
	}
	rec.SHA256, rec.Size, sel.Fetched = sha, size, fetched
	outcome := "failed"
	if err != nil {
		rec.Status, rec.Reason = datasets.StatusFailed, err.Error()
		span.SetStatus(codes.Error, rec.Reason) // data in the result, not a Go error
	} else {
		rec.Status = datasets.StatusLoaded
		outcome = map[bool]string{true: "loaded", false: "cached"}[fetched]
	}
	m.metrics.datasetFetched(outcome)
	span.SetAttributes(AttrDatasetStatus.String(string(rec.Status)))
	m.setStatus(ctx, e, rec)
	sel.Record = rec
	return sel, nil
}

// ForgetDataset drops the host-side cached copies of dataset id that this
// Manager's selections use (under DATASET_CACHE_SCOPE: the shared one, the
// namespace's, or every session key's of the namespace), so the next
// selection fetches it again: call it when the dataset changed at its
// source. Sessions that loaded it keep their file until they select it with
// Refresh.
func (m *Manager) ForgetDataset(ctx context.Context, id string) error {
	if err := m.begin(); err != nil {
		return err
	}
	defer m.calls.Done()
	if _, err := datasets.SafeName(id); err != nil {
		return fmt.Errorf("forget dataset: %w", err)
	}
	return m.dsCache.Forget(ctx, datasets.Request{ID: id, Namespace: m.ns})
}

// staged reports whether /session/data/name exists with size bytes (a
// LOADED record may outlive its container).
func (m *Manager) staged(ctx context.Context, e *entry, name string, size int64) bool {
	if e.client == nil {
		return false
	}
	files, _, err := e.client.Scan(ctx, DatasetsDir, maxScan)
	if err != nil {
		return false
	}
	for _, f := range files {
		if f.Path == name && f.Kind == "file" && f.Size == size {
			return true
		}
	}
	return false
}

func (m *Manager) setStatus(ctx context.Context, e *entry, rec datasets.Record) {
	rec.Updated = time.Now()
	if err := m.dsStatus.Set(context.WithoutCancel(ctx), rec); err != nil {
		m.log.Warn("record dataset status", "session_id", e.id, "dataset", rec.DatasetID, "err", err)
	}
	if m.cfg.SessionStorage != config.StorageBind {
		return
	}
	list, err := m.dsStatus.List(context.WithoutCancel(ctx), m.ns, e.id)
	if err == nil {
		err = writeRecord(m.dir(e), DatasetsFile, list)
	}
	if err != nil {
		m.log.Warn("write "+DatasetsFile, "session_id", e.id, "err", err)
	}
}

// DatasetInfo describes a dataset file as code in the session sees it.
type DatasetInfo struct {
	datasets.Info
	Source string // "local" (/data, read-only) or "api" (/session/data)
}

// Listing is what code in a session can read.
type Listing struct {
	Access   config.DatasetAccess
	Files    []DatasetInfo     // Info.Path is the path inside the sandbox
	Statuses []datasets.Record // the session's API selections, failed ones included
	Message  string            // says plainly when there are no datasets
}

// Datasets describes every dataset code in the session of key can read:
// the read-only /data folder (LOCAL_RO, HYBRID) and what was staged into
// /session/data (API, HYBRID), with Parquet schemas and CSV headers read on
// the host. The session need not exist.
func (m *Manager) Datasets(ctx context.Context, key string) (Listing, error) {
	if err := m.begin(); err != nil {
		return Listing{}, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return Listing{}, err
	}
	l := Listing{Access: m.cfg.DatasetAccess}
	if m.cfg.DatasetAccess == config.AccessNone {
		l.Message = "no datasets are configured (DATASET_ACCESS=NONE)"
		return l, nil
	}
	if m.cfg.DatasetAccess.UsesLocal() {
		infos, err := datasets.DescribeDir(m.cfg.DatasetsHostRO)
		if err != nil && len(infos) == 0 {
			return l, fmt.Errorf("list datasets: %w", err)
		}
		for _, in := range infos {
			in.Path = path.Join("/data", in.Name)
			l.Files = append(l.Files, DatasetInfo{Info: in, Source: "local"})
		}
	}
	if m.cfg.DatasetAccess.UsesAPI() {
		recs, err := m.dsStatus.List(ctx, m.ns, ID(key))
		if err != nil {
			return l, fmt.Errorf("list datasets: %w", err)
		}
		l.Statuses = recs
		for _, r := range recs {
			if r.Status != datasets.StatusLoaded {
				continue
			}
			in, err := m.describeBlob(r.SHA256, r.Name)
			if err != nil {
				in.Problem = err.Error()
			}
			in.Path = path.Join(DatasetsDir, r.Name)
			l.Files = append(l.Files, DatasetInfo{Info: in, Source: "api"})
		}
	}
	switch {
	case len(l.Files) == 0 && !m.cfg.DatasetAccess.UsesLocal() && !m.CanSelectDatasets():
		// API is the default (LangGraph-Sandbox's): without a fetcher
		// there is nothing to wait for.
		l.Message = "no datasets are configured (DATASET_ACCESS=API without a fetcher)"
	case len(l.Files) == 0:
		l.Message = "no datasets yet"
	}
	return l, nil
}

// describeBlob describes a cached dataset under its file name (the format
// is read from the name as well as the content).
func (m *Manager) describeBlob(sha, name string) (datasets.Info, error) {
	blob, err := m.art.blobs.Path(sha)
	if err != nil {
		return datasets.Info{Name: name}, err
	}
	dir, err := os.MkdirTemp("", "agentbox-describe-")
	if err != nil {
		return datasets.Info{Name: name}, err
	}
	defer os.RemoveAll(dir)
	link := filepath.Join(dir, name)
	if err := os.Symlink(blob, link); err != nil {
		return datasets.Info{Name: name}, err
	}
	return datasets.Describe(link)
}

// Export is a file copied out of a session.
type Export struct {
	HostPath string   // the copy in EXPORT_DIR
	Artifact Artifact // the same bytes as an artifact, with its download URL
}

// Export copies a file from the session of key (a path under /session, such
// as /session/data/result.parquet) to EXPORT_DIR under a timestamped name
// that never overwrites another, and stores it as an artifact.
func (m *Manager) Export(ctx context.Context, key, file string) (Export, error) {
	if err := m.begin(); err != nil {
		return Export{}, err
	}
	defer m.calls.Done()
	rel, err := sessionRel(file)
	if err != nil {
		return Export{}, err
	}
	e, release, err := m.acquire(ctx, key, false)
	if err != nil {
		return Export{}, err
	}
	defer release()
	if err := os.MkdirAll(m.cfg.ExportDir, 0o755); err != nil {
		return Export{}, fmt.Errorf("export %s: %w", file, err)
	}
	out, hostPath, err := createExport(m.cfg.ExportDir, path.Base(rel), time.Now())
	if err != nil {
		return Export{}, fmt.Errorf("export %s: %w", file, err)
	}
	var sha string
	var size int64
	// The copy is an artifact: like an ingestion, it takes its bytes of
	// the room above DISK_RESERVE_MB as they come, and stops at ErrNoSpace
	// when there is none left.
	room := &roomReader{m: m, room: m.blobRoom()}
	defer room.giveBack()
	copyIn := func(r io.Reader) error {
		batch := m.art.blobs.NewBatch()
		defer batch.Abort()
		room.r = r
		var err error
		if sha, size, err = batch.Put(ctx, io.TeeReader(room, out), 0); err != nil {
			if room.full {
				return fmt.Errorf("%w on the host's disk: the file would eat into DISK_RESERVE_MB=%d MiB", ErrNoSpace, m.cfg.DiskReserveMB)
			}
			return err
		}
		return batch.Commit(ctx)
	}
	if local := m.localSession(ctx, e); local != "" {
		var f *os.File
		if f, err = m.openFile(local, rel); err == nil {
			err = copyIn(f)
			f.Close()
		}
	} else if fr, ok := m.drv.(fileReader); ok {
		found := false
		err = fr.ReadFiles(ctx, e.containerID, m.cfg.User, "/session", []string{rel}, func(_ string, r io.Reader) error {
			found = true
			return copyIn(r)
		})
		if err == nil && !found {
			err = errNotRegular
		}
	} else {
		err = errors.New("the driver cannot read files out of a container")
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(hostPath)
		return Export{}, fmt.Errorf("export %s: %w", file, err)
	}
	a, err := m.addArtifact(ctx, e, "exports/"+filepath.Base(hostPath), sha, size, artifacts.DetectMIME(hostPath, nil))
	if err != nil {
		return Export{HostPath: hostPath}, fmt.Errorf("export %s: %w", file, err)
	}
	return Export{HostPath: hostPath, Artifact: a}, nil
}

// roomReader reads r, taking each byte it reads of the blobstore's room
// above the reserve (room, as blobRoom read it; -1: no reserve).
type roomReader struct {
	m     *Manager
	r     io.Reader
	room  int64
	taken int64
	full  bool
}

func (rr *roomReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if n > 0 && rr.room >= 0 {
		if !rr.m.takeBlobRoom(rr.room, int64(n)) {
			rr.full = true
			return 0, ErrNoSpace
		}
		rr.taken += int64(n)
	}
	return n, err
}

// giveBack gives back the room taken, once the copy is stored or dropped.
func (rr *roomReader) giveBack() {
	if rr.taken > 0 {
		rr.m.giveBlobRoom(rr.taken)
	}
}

// sessionRel checks that file names something under /session and returns
// its path relative to /session.
func sessionRel(file string) (string, error) {
	clean := path.Clean(file)
	rel, ok := strings.CutPrefix(clean, "/session/")
	if !ok || rel == "" || strings.ContainsRune(file, 0) || slices.Contains(strings.Split(rel, "/"), "..") {
		return "", fmt.Errorf("export %q: want a file under /session", file)
	}
	return rel, nil
}

// createExport creates <dir>/<stem>-<UTC time><ext>, adding -2, -3, ... if
// that exists: an export never overwrites another.
func createExport(dir, base string, now time.Time) (*os.File, string, error) {
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	stamp := now.UTC().Format("20060102T150405.000Z")
	for n := 1; n < 1000; n++ {
		name := fmt.Sprintf("%s-%s%s", stem, stamp, ext)
		if n > 1 {
			name = fmt.Sprintf("%s-%s-%d%s", stem, stamp, n, ext)
		}
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", err
		}
	}
	return nil, "", errors.New("too many exports of the same name in one millisecond")
}
