package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/kernel"
	"github.com/agentbox/agentbox/session"
)

// view is everything shown about one session; --json prints it as is.
type view struct {
	Source      string         `json:"source"` // "database" or "folder"
	Dir         string         `json:"dir,omitempty"`
	Layout      string         `json:"layout,omitempty"`                      // --dir: "workspace" (records beside workspace/, out of the sandbox's reach) or "legacy" (records in the sandbox's folder)
	Forgeable   *bool          `json:"records_writable_by_sandbox,omitempty"` // --dir: whether the sandbox could have written the records
	Note        string         `json:"records_note,omitempty"`                // --dir: why it could
	Session     sessionView    `json:"session"`
	Executions  []execView     `json:"executions"`
	Shown       int            `json:"shown"` // len(Executions)
	State       *kernel.State  `json:"python_state,omitempty"`
	StateSource string         `json:"python_state_source,omitempty"` // "live" or "python_state.json"
	Datasets    []datasetView  `json:"datasets"`
	Artifacts   []artifactView `json:"artifacts,omitempty"`
	Warnings    []string       `json:"warnings,omitempty"`
	live        *session.Info  // the container, when the engine saw it
	logOff      int64          // --dir: the end of session.log as read
	logErr      string         // --dir: why session.log could not be read, as warned
}

type sessionView struct {
	Key            string            `json:"key"`
	ID             string            `json:"id"`
	Namespace      string            `json:"namespace,omitempty"`
	Container      string            `json:"container"`
	Image          string            `json:"image"`
	State          string            `json:"state"` // the container's, "stopped (reason)", or "unknown"
	Storage        string            `json:"storage,omitempty"`
	Limits         map[string]string `json:"limits"`
	Created        time.Time         `json:"created"`
	LastUsed       time.Time         `json:"last_used"`
	Stopped        *time.Time        `json:"stopped,omitempty"`
	StopReason     string            `json:"stop_reason,omitempty"`
	ExecutionCount int               `json:"execution_count"`
	MemoryBytes    int64             `json:"memory_bytes,omitempty"`
}

type execView struct {
	Seq            int64              `json:"seq,omitempty"`
	ID             string             `json:"id"`
	ExecutionCount int                `json:"execution_count"`
	Started        time.Time          `json:"started"`
	DurationMS     float64            `json:"duration_ms"`
	Code           string             `json:"code"`
	Stdout         string             `json:"stdout"`
	Stderr         string             `json:"stderr"`
	Results        []resultView       `json:"results"` // rich results: trailing expression, displays, figures
	Error          *kernel.Exception  `json:"error"`
	TimedOut       bool               `json:"timed_out,omitempty"`
	Interrupted    bool               `json:"interrupted,omitempty"`
	StateLost      bool               `json:"state_lost,omitempty"`
	Replayed       bool               `json:"replayed,omitempty"`
	Artifacts      []session.Artifact `json:"artifacts"`
	TraceID        string             `json:"trace_id,omitempty"` // the W3C trace it ran in, when one was sampled
}

type datasetView struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Size    int64     `json:"size"`
	Updated time.Time `json:"updated"`
}

type artifactView struct {
	ID      string     `json:"id"`
	Name    string     `json:"name"`
	Size    int64      `json:"size"`
	MIME    string     `json:"mime"`
	SHA256  string     `json:"sha256"`
	Created *time.Time `json:"created,omitempty"`
	URL     string     `json:"url,omitempty"`
	Expires *time.Time `json:"url_expires,omitempty"`
}

// ---- --dir: a BIND session folder ----

func viewDir(ctx context.Context, o options, out *printer, stderr io.Writer) int {
	f, err := openFolder(o.dir)
	if err == nil {
		defer f.Close()
		var v *view
		if v, err = readDir(f, o); err == nil {
			if code := out.view(v, o); code != exitOK || !o.follow {
				return code
			}
			return followDir(ctx, f, v.logOff, v.logErr, o, out, stderr)
		}
	}
	fmt.Fprintf(stderr, "session-viewer: %s: %s\n", termsafe.Line(o.dir), oneLine(err))
	if errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitSystem
}

// readDir reads the session folder f. Only its metadata is required; a
// record that cannot be read is a warning in the view.
func readDir(f *folder, o options) (*view, error) {
	var md session.Metadata
	if err := f.readJSON(session.MetadataFile, &md); err != nil {
		return nil, err
	}
	forgeable := f.forgeable != ""
	v := &view{Source: "folder", Dir: f.path, Forgeable: &forgeable, Note: f.forgeable, Layout: "workspace",
		Session: sessionView{
			Key: md.Key, ID: md.ID, Container: md.Container, Image: md.Image, State: "unknown",
			Storage: string(config.StorageBind), Limits: md.Limits, Created: md.Created, LastUsed: md.LastUsed,
			ExecutionCount: md.ExecutionCount,
		}}
	if _, err := f.root.Lstat(workspaceDir); err != nil {
		v.Layout = "legacy"
	}
	entries, off, note, err := f.readLog(0, true)
	v.logOff = off
	all := entries
	if note != "" {
		v.warn("%s", note)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		v.logErr = err.Error()
		v.warn("%v", err)
	}
	if o.limit > 0 && len(entries) > o.limit {
		entries = entries[len(entries)-o.limit:]
	}
	for _, e := range entries {
		v.Executions = append(v.Executions, fromLog(e))
	}
	v.Shown = len(v.Executions)
	if !o.noState {
		var st kernel.State
		if err := f.readJSON(session.StateFile, &st); err == nil {
			v.State, v.StateSource = &st, session.StateFile
		} else if !errors.Is(err, fs.ErrNotExist) {
			v.warn("%v", err)
		}
	}
	var recs []datasets.Record
	if err := f.readJSON(session.DatasetsFile, &recs); err == nil {
		v.setDatasets(recs)
	} else if !errors.Is(err, fs.ErrNotExist) {
		v.warn("%v", err)
	}
	if !o.noArtifacts {
		// No database here: the artifacts the log recorded, with the URLs
		// signed then (they may have expired).
		for _, e := range all {
			for _, a := range e.Artifacts {
				v.Artifacts = append(v.Artifacts, artifactView{ID: a.ID, Name: a.Name, Size: a.Size, MIME: a.MIME, SHA256: a.SHA256, URL: a.URL})
			}
		}
	}
	return v, nil
}

// fromLog is a session.log line as shown; figures keep the URLs the log
// recorded (there is no secret to sign fresh ones with).
func fromLog(e session.LogEntry) execView {
	return execView{ID: e.ID, ExecutionCount: e.ExecutionCount, Started: e.Time, DurationMS: e.DurationMS,
		Code: e.Code, Stdout: e.Stdout, Stderr: e.Stderr, Error: e.Error, TimedOut: e.TimedOut,
		Results:   fromOutputs(e.Results, e.ExecutionCount, e.Artifacts, nil),
		StateLost: e.StateLost, Artifacts: nonNil(e.Artifacts), TraceID: e.TraceID}
}

// followDir prints the lines appended to session.log after offset off.
// A reason it cannot read the log is said once, until it changes: lastErr
// is the one the view already showed.
func followDir(ctx context.Context, f *folder, off int64, lastErr string, o options, out *printer, stderr io.Writer) int {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
		entries, next, _, err := f.readLog(off, false)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
			lastErr = ""
		case err.Error() != lastErr:
			lastErr = err.Error()
			fmt.Fprintf(stderr, "session-viewer: %s\n", oneLine(err))
		}
		off = next
		for _, e := range entries {
			out.followed(fromLog(e), o)
		}
	}
}

// ---- KEY: the history database, plus the engine ----

func viewKey(ctx context.Context, cfg config.Config, ns string, o options, out *printer, stderr io.Writer) int {
	st, code := openStore(ctx, cfg, stderr)
	if st == nil {
		if code == exitOK {
			fmt.Fprintf(stderr, "session-viewer: no such session %q (no history database at %s)\n", o.key, cfg.ArtifactsDB)
			return exitNotFound
		}
		return code
	}
	defer st.Close()
	rec, err := st.Session(ctx, ns, session.ID(o.key))
	if errors.Is(err, store.ErrNotFound) {
		rec, err = st.Session(ctx, ns, o.key) // a session id, as the list shows
	}
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(stderr, "session-viewer: no such session %q in namespace %q\n", o.key, ns)
		return exitNotFound
	}
	if err != nil {
		fmt.Fprintf(stderr, "session-viewer: %s\n", oneLine(err))
		return exitSystem
	}
	v := &view{Source: "database", Session: sessionView{
		Key: rec.Key, ID: rec.ID, Namespace: ns, Container: rec.ContainerID, Image: rec.Image,
		Storage: rec.Storage, Limits: rec.Limits, Created: rec.Created, LastUsed: rec.LastUsed,
		ExecutionCount: rec.ExecutionCount, StopReason: rec.StopReason,
	}}
	if !rec.Stopped.IsZero() {
		t := rec.Stopped
		v.Session.Stopped = &t
	}
	dir := filepath.Join(cfg.SessionsRoot, rec.ID)

	m, engineErr := openManager(ctx, cfg, ns)
	if m != nil {
		defer closeManager(ctx, m, stderr)
		list, err := m.List(ctx)
		if err != nil {
			engineErr = err
		}
		for i := range list {
			if list[i].ID == rec.ID {
				v.live = &list[i]
			}
		}
	}
	switch {
	case v.live != nil:
		v.Session.State = v.live.State
		if v.live.PausedBy == session.PausedByIdle {
			v.Session.State += " (idle)" // its next call resumes it
		}
		if v.Session.StopReason == "" {
			v.Session.StopReason = v.live.StopReason // expired, not removed yet
		}
		v.Session.Container = v.live.ContainerID
		v.Session.MemoryBytes = v.live.MemoryBytes
		if v.live.LastUsed.After(v.Session.LastUsed) {
			v.Session.LastUsed = v.live.LastUsed
		}
	case v.Session.Stopped != nil:
		v.Session.State = "stopped"
	case engineErr != nil:
		v.Session.State = "unknown"
		v.warn("engine: %s", oneLine(engineErr))
	default:
		v.Session.State = "gone" // recorded as running, but no container
	}

	execs, err := st.Executions(ctx, ns, rec.ID, o.limit)
	if err != nil {
		fmt.Fprintf(stderr, "session-viewer: %s\n", oneLine(err))
		return exitSystem
	}
	var sign *urlSigner
	if !o.noArtifacts {
		sign = &urlSigner{cfg: cfg}
	}
	for _, e := range execs {
		v.Executions = append(v.Executions, fromStore(e, sign))
	}
	v.Shown = len(v.Executions)

	code = exitOK
	if !o.noState {
		if v.live != nil && v.live.State == "running" {
			ictx, cancel := context.WithTimeout(ctx, engineTimeout)
			s, err := m.Inspect(ictx, rec.Key)
			cancel()
			if err == nil {
				v.State, v.StateSource = s, "live"
			} else {
				v.warn("python state: %s", oneLine(err))
			}
		}
		if v.State == nil {
			s, err := readStateFile(dir, v)
			if err == nil {
				v.State, v.StateSource = s, session.StateFile
			} else if v.live != nil && v.live.State == "running" {
				code = exitSystem // running, yet its state could not be read
			}
		}
	}
	recs, err := datasets.NewStatuses(st).List(ctx, ns, rec.ID)
	if err != nil {
		v.warn("datasets: %s", oneLine(err))
	}
	v.setDatasets(recs)
	if !o.noArtifacts {
		v.Artifacts = signedArtifacts(ctx, st, ns, rec.ID, sign, v)
		if err := sign.err(); err != nil {
			v.warn("artifact URLs: %s", oneLine(err))
		}
	}
	if c := out.view(v, o); c != exitOK {
		return c
	}
	if o.follow {
		var last int64
		if n := len(execs); n > 0 {
			last = execs[n-1].Seq
		} else if all, err := st.Executions(ctx, ns, rec.ID, 1); err == nil && len(all) > 0 {
			last = all[0].Seq
		}
		return followStore(ctx, st, ns, rec.ID, last, sign, o, out, stderr)
	}
	return code
}

func followStore(ctx context.Context, st *store.Store, ns, id string, last int64, sign *urlSigner, o options, out *printer, stderr io.Writer) int {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
		execs, err := st.Executions(ctx, ns, id, 100)
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "session-viewer: %s\n", oneLine(err))
			continue
		}
		for _, e := range execs {
			if e.Seq > last {
				out.followed(fromStore(e, sign), o)
				last = e.Seq
			}
		}
	}
}

// fromStore is a row of the history as shown; sign, when not nil, gives
// the figures stored as artifacts fresh URLs (the history keeps none).
func fromStore(e store.Execution, sign *urlSigner) execView {
	var arts []session.Artifact
	if len(e.Artifacts) > 0 {
		_ = json.Unmarshal(e.Artifacts, &arts)
	}
	return execView{Seq: e.Seq, ID: e.ExecID, ExecutionCount: e.ExecutionCount, Started: e.Started,
		DurationMS: float64(e.Duration.Microseconds()) / 1000, Code: e.Code, Stdout: e.Stdout, Stderr: e.Stderr,
		Results: fromOutputs(e.Outputs, e.ExecutionCount, arts, sign),
		Error:   e.Error, TimedOut: e.TimedOut, Interrupted: e.Interrupted, StateLost: e.StateLost,
		Replayed: e.Replayed, Artifacts: nonNil(arts), TraceID: e.TraceID}
}

// urlSigner signs fresh download URLs, valid ARTIFACT_TOKEN_TTL_S, with the
// secret the managers sign with: ARTIFACT_TOKEN_SECRET, else the one kept
// beside the database, read when the first URL is signed.
type urlSigner struct {
	cfg    config.Config
	once   sync.Once
	signer *artifacts.Signer
	fail   error
}

// sign returns a fresh URL for artifact id and when it expires; "" and nil
// when it cannot be signed (err says why). A nil signer signs nothing.
func (u *urlSigner) sign(id string) (string, *time.Time) {
	if u == nil {
		return "", nil
	}
	u.once.Do(func() {
		secret := []byte(u.cfg.TokenSecret)
		if len(secret) == 0 {
			if secret, u.fail = artifacts.LoadOrCreateSecret(artifacts.SecretPath(u.cfg.ArtifactsDB)); u.fail != nil {
				return
			}
		}
		u.signer, u.fail = artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: secret}}, u.cfg.TokenTTL)
	})
	if u.signer == nil {
		return "", nil
	}
	url, exp, err := u.signer.URL(u.cfg.ArtifactPublicURL, id, time.Now())
	if err != nil {
		return "", nil
	}
	return url, &exp
}

// err says why URLs could not be signed, once one was asked for.
func (u *urlSigner) err() error {
	if u == nil || u.signer != nil {
		return nil
	}
	return u.fail
}

// signedArtifacts lists the session's artifacts, with fresh download URLs
// when sign is not nil.
func signedArtifacts(ctx context.Context, st *store.Store, ns, id string, sign *urlSigner, v *view) []artifactView {
	list, err := artifacts.NewIndex(st).BySession(ctx, ns, id)
	if err != nil {
		v.warn("artifacts: %s", oneLine(err))
		return nil
	}
	out := make([]artifactView, 0, len(list))
	for _, a := range list {
		created := a.Created
		av := artifactView{ID: a.ID, Name: a.Name, Size: a.Size, MIME: a.MIME, SHA256: a.SHA256, Created: &created}
		av.URL, av.Expires = sign.sign(a.ID)
		out = append(out, av)
	}
	return out
}

// ---- no arguments: the list ----

type listRow struct {
	Key            string    `json:"key"`
	ID             string    `json:"id"`
	Container      string    `json:"container,omitempty"`
	State          string    `json:"state"`
	Created        time.Time `json:"created"`
	LastUsed       time.Time `json:"last_used"`
	ExecutionCount int       `json:"execution_count"`
	MemoryBytes    int64     `json:"memory_bytes,omitempty"`
}

func listSessions(ctx context.Context, cfg config.Config, ns string, o options, out *printer, stderr io.Writer) int {
	st, code := openStore(ctx, cfg, stderr)
	if code != exitOK {
		return code
	}
	var recs []store.Session
	if st != nil {
		defer st.Close()
		var err error
		if recs, err = st.Sessions(ctx, ns); err != nil {
			fmt.Fprintf(stderr, "session-viewer: %s\n", oneLine(err))
			return exitSystem
		}
	}
	var live []session.Info
	m, err := openManager(ctx, cfg, ns)
	if m != nil {
		defer closeManager(ctx, m, stderr)
		live, err = m.List(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "session-viewer: engine: %s (showing the history only)\n", oneLine(err))
	}
	byID := map[string]session.Info{}
	for _, in := range live {
		byID[in.ID] = in
	}
	rows := make([]listRow, 0, len(recs)+len(live))
	for _, r := range recs {
		row := listRow{Key: r.Key, ID: r.ID, Container: r.ContainerID, Created: r.Created, LastUsed: r.LastUsed, ExecutionCount: r.ExecutionCount}
		if in, ok := byID[r.ID]; ok {
			row.State, row.Container, row.MemoryBytes = in.State, in.ContainerID, in.MemoryBytes
			if in.PausedBy == session.PausedByIdle {
				row.State += " (idle)" // its next call resumes it
			}
			if in.LastUsed.After(row.LastUsed) {
				row.LastUsed = in.LastUsed
			}
			delete(byID, r.ID)
		} else if !r.Stopped.IsZero() {
			row.State = "stopped"
			if r.StopReason != "" {
				row.State += " (" + r.StopReason + ")"
			}
		} else if m == nil {
			row.State = "unknown"
		} else {
			row.State = "gone"
		}
		rows = append(rows, row)
	}
	for _, in := range live {
		if _, ok := byID[in.ID]; ok { // a container the history does not know
			rows = append(rows, listRow{Key: in.Key, ID: in.ID, Container: in.ContainerID, State: in.State,
				Created: in.Created, LastUsed: in.LastUsed, ExecutionCount: in.ExecutionCount, MemoryBytes: in.MemoryBytes})
		}
	}
	out.list(rows, o)
	return exitOK
}

// ---- helpers ----

// openStore opens the history database; (nil, exitOK) when there is none
// yet, since a viewer must not create it.
func openStore(ctx context.Context, cfg config.Config, stderr io.Writer) (*store.Store, int) {
	if _, err := os.Stat(cfg.ArtifactsDB); errors.Is(err, fs.ErrNotExist) {
		return nil, exitOK
	}
	st, err := store.Open(ctx, cfg.ArtifactsDB)
	if err != nil {
		fmt.Fprintf(stderr, "session-viewer: history database: %s\n", oneLine(err))
		return nil, exitSystem
	}
	return st, exitOK
}

// openManager reaches the engine; nil and why when it cannot.
func openManager(ctx context.Context, cfg config.Config, ns string) (*session.Manager, error) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	return session.NewManager(ctx, cfg, session.WithNamespace(ns))
}

// closeManager releases the manager, leaving its sessions running.
func closeManager(ctx context.Context, m *session.Manager, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		fmt.Fprintf(stderr, "session-viewer: close: %s\n", oneLine(err))
	}
}

// readStateFile reads python_state.json from the BIND session folder dir
// (the last state recorded, when the live one is out of reach) as --dir
// reads it, warning in v when it was refused or could have been forged.
func readStateFile(dir string, v *view) (*kernel.State, error) {
	f, err := openFolder(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var s kernel.State
	if err := f.readJSON(session.StateFile, &s); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			v.warn("%v", err)
		}
		return nil, err
	}
	if f.forgeable != "" {
		v.warn("%s: %s", session.StateFile, f.forgeable)
	}
	return &s, nil
}

func (v *view) warn(format string, args ...any) {
	v.Warnings = append(v.Warnings, fmt.Sprintf(format, args...))
}

func (v *view) setDatasets(recs []datasets.Record) {
	for _, r := range recs {
		v.Datasets = append(v.Datasets, datasetView{ID: r.DatasetID, Name: r.Name, Status: string(r.Status), Reason: r.Reason, Size: r.Size, Updated: r.Updated})
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
