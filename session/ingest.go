package session

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/kernel"
)

// ArtifactsDir is where code writes the files it wants to hand back.
const ArtifactsDir = "/session/artifacts"

// maxScan bounds the files one scan lists; a folder with more is reported.
const maxScan = 10000

// errNotRegular is ErrNotRegular under the name the ingestion code has
// always used: an export of a FIFO says ErrNotRegular to its caller.
var errNotRegular = ErrNotRegular

// Skipped is a file under /session/artifacts that was not ingested, and why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// stamp is what tells a changed file from an unchanged one without reading
// it.
type stamp struct {
	size, mtime int64
}

// artifactStore is the Manager's part of the artifacts package.
type artifactStore struct {
	blobs  *artifacts.Blobstore
	index  *artifacts.Index
	signer *artifacts.Signer
}

func (m *Manager) openArtifacts() error {
	secret := []byte(m.cfg.TokenSecret)
	if len(secret) == 0 {
		var err error
		if secret, err = artifacts.LoadOrCreateSecret(artifacts.SecretPath(m.cfg.ArtifactsDB)); err != nil {
			return err
		}
	}
	signer, err := artifacts.NewSigner(artifacts.Keys{Current: artifacts.Key{Secret: secret}}, m.cfg.TokenTTL)
	if err != nil {
		return err
	}
	blobs := artifacts.NewBlobstore(m.cfg.BlobstoreDir)
	blobs.Logger = m.log
	m.art = artifactStore{blobs: blobs, index: artifacts.NewIndex(m.store), signer: signer}
	return nil
}

// baseline records the files a session already has when this process opens
// it (scan: a reattached container, or a BIND folder an earlier session
// left) and that are already stored, so that the next ingestion takes what
// is not: what later executions create or change, and what an execution of
// a manager that died wrote before its files were stored. A file counts as
// stored when the index holds its name with its size and it was not
// modified after it was ingested (a rewrite counts as a change, as it does
// within one process). It also resets what the session ingested so far (for
// ARTIFACT_MAX_SESSION_MB).
func (m *Manager) baseline(ctx context.Context, e *entry, scan bool) {
	e.files = map[string]stamp{}
	e.ingested = -1 // counted from the index when first needed
	if !scan {
		return
	}
	files, _, err := e.client.Scan(ctx, ArtifactsDir, maxScan)
	if err != nil || len(files) == 0 {
		return
	}
	stored, err := m.art.index.BySession(ctx, m.ns, e.id)
	if err != nil {
		m.log.Warn("list stored artifacts", "session_id", e.id, "err", err)
		return
	}
	latest := make(map[string]artifacts.Artifact, len(stored))
	for _, a := range stored { // newest first
		if _, ok := latest[a.Name]; !ok {
			latest[a.Name] = a
		}
	}
	for _, f := range files {
		a, ok := latest[f.Path]
		if !ok {
			continue
		}
		if a.Size == f.Size && f.MtimeNS <= a.Created.UnixNano() {
			e.files[f.Path] = stamp{f.Size, f.MtimeNS}
		}
	}
}

// sessionBytes returns the artifact bytes the session ingested so far.
func (m *Manager) sessionBytes(ctx context.Context, e *entry) int64 {
	if e.ingested < 0 {
		e.ingested = 0
		if list, err := m.art.index.BySession(ctx, m.ns, e.id); err == nil {
			for _, a := range list {
				e.ingested += a.Size
			}
		}
	}
	return e.ingested
}

// ingest stores the files the execution created or changed under
// /session/artifacts, and the figures it returned, and lists them in res
// with their download URLs. What cannot be stored is listed in
// res.SkippedArtifacts with the reason; nothing is dropped silently.
// files is the listing of /session/artifacts the kernel put in the result
// (kr.Files); when the result has none (a result fetched after the
// connection broke), the folder is listed now.
func (m *Manager) ingest(ctx context.Context, e *entry, res *Result, files []kernel.File, more bool) {
	ctx = context.WithoutCancel(ctx)
	n0, dedup := len(res.Artifacts), 0
	defer func() { m.metrics.ingested(res.Artifacts[n0:], dedup) }()
	if m.cfg.ArtifactFigures {
		m.ingestFigures(ctx, e, res)
	}
	if files == nil {
		if e.client == nil {
			return
		}
		var err error
		if files, more, err = e.client.Scan(ctx, ArtifactsDir, maxScan); err != nil {
			m.log.Warn("scan artifacts", "session_id", e.id, "err", err)
			res.SkippedArtifacts = append(res.SkippedArtifacts, Skipped{Name: ".", Reason: "could not list " + ArtifactsDir + ": " + err.Error()})
			return
		}
	}
	if more {
		res.SkippedArtifacts = append(res.SkippedArtifacts, Skipped{Name: ".", Reason: fmt.Sprintf("more than %d files under %s: only the first were looked at", maxScan, ArtifactsDir)})
	}
	seen := make(map[string]stamp, len(files))
	var changed []string
	kinds := map[string]string{}
	for _, f := range files {
		st := stamp{f.Size, f.MtimeNS}
		seen[f.Path] = st
		if old, ok := e.files[f.Path]; ok && old == st {
			continue
		}
		changed = append(changed, f.Path)
		kinds[f.Path] = f.Kind
	}
	e.files = seen
	slices.Sort(changed)
	var accepted []string
	var planned int64
	maxFile := int64(m.cfg.ArtifactMaxFileMB) << 20
	skip := func(name, reason string) {
		res.SkippedArtifacts = append(res.SkippedArtifacts, Skipped{Name: name, Reason: reason})
	}
	room := m.blobRoom()
	var taken int64 // of the room, given back once written
	defer func() {
		if taken > 0 {
			m.giveBlobRoom(taken)
		}
	}()
	for _, name := range changed {
		size := seen[name].size
		switch {
		case kinds[name] == "link":
			skip(name, "symbolic link: not followed")
		case kinds[name] == "badname":
			skip(name, "file name is not valid UTF-8")
		case kinds[name] != "file":
			skip(name, "not a regular file")
		case len(accepted) >= m.cfg.ArtifactMaxFiles:
			skip(name, fmt.Sprintf("more than %d new files in one execution (ARTIFACT_MAX_FILES)", m.cfg.ArtifactMaxFiles))
		case size > maxFile:
			skip(name, fmt.Sprintf("%d bytes, more than %d MiB (ARTIFACT_MAX_FILE_MB)", size, m.cfg.ArtifactMaxFileMB))
		case m.cfg.ArtifactMaxSessionMB > 0 && m.sessionBytes(ctx, e)+planned+size > int64(m.cfg.ArtifactMaxSessionMB)<<20:
			skip(name, fmt.Sprintf("the session would pass %d MiB of artifacts (ARTIFACT_MAX_SESSION_MB)", m.cfg.ArtifactMaxSessionMB))
		case room >= 0 && !m.takeBlobRoom(room, size):
			// "store: ": kept for the next ingestion, once there is room.
			// The room is shared with the ingestions of other sessions
			// running now: each takes what it plans to write.
			skip(name, fmt.Sprintf("store: %v on the host's disk: %d bytes would eat into DISK_RESERVE_MB=%d MiB", ErrNoSpace, size, m.cfg.DiskReserveMB))
		default:
			if room >= 0 {
				taken += size
			}
			accepted = append(accepted, name)
			planned += size
		}
	}
	if len(accepted) == 0 {
		return
	}
	// Every file goes into one batch: written and hashed as it streams,
	// made durable with a single flush, and only then indexed (a thousand
	// small files would otherwise pay a thousand disk flushes). Small files
	// travel in one pack, which the blobstore unpacks into a file each
	// after the result has left: creating a thousand files is what costs.
	batch := m.art.blobs.NewBatch(artifacts.PackSmall())
	defer batch.Abort()
	stored, readSkips, done := m.readArtifacts(ctx, e, batch, accepted, maxFile)
	res.SkippedArtifacts = append(res.SkippedArtifacts, readSkips...)

	// The rows go in while the batch flushes, and become visible only once
	// the blobs are durable: a row never names content a crash could lose.
	rows := make([]artifacts.Artifact, 0, len(stored))
	for _, p := range stored {
		rows = append(rows, artifacts.Artifact{Namespace: m.ns, SessionID: e.id, SessionKey: e.key, Name: p.name, SHA256: p.sha, Size: p.size, MIME: p.mime})
	}
	if m.metrics != nil {
		dedup = m.stored(stored)
	}
	committed := make(chan error, 1)
	go func() { committed <- batch.Commit(ctx) }()
	added, err := m.art.index.AddAllAfter(ctx, rows, committed)
	if err != nil {
		reason, what := "index: ", "the server's database"
		if errors.Is(err, artifacts.ErrNotDurable) {
			reason, what = "store: ", "the server's artifact store"
		}
		m.log.Warn("store artifacts", "session_id", e.id, "err", err)
		for _, p := range stored {
			skip(p.name, reason+m.storageTrouble(err, what).Error())
		}
	}
	// What could not be stored for want of room or a free database is
	// not dropped: the next ingestion takes it again, and the caller hears.
	retry := 0
	for _, s := range res.SkippedArtifacts {
		if strings.HasPrefix(s.Reason, "store: ") || strings.HasPrefix(s.Reason, "index: ") {
			delete(e.files, s.Name)
			retry++
		}
	}
	if retry > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d artifact files could not be stored yet (see skipped_artifacts); they are stored on the next call", retry))
	}
	for _, a := range added {
		if e.ingested >= 0 {
			e.ingested += a.Size
		}
		res.Artifacts = append(res.Artifacts, m.describe(a))
	}
	if m.cfg.ArtifactMove {
		local := m.localSession(ctx, e)
		for _, a := range res.Artifacts {
			if _, ok := done[a.Name]; !ok {
				continue // a figure
			}
			if err := m.removeFile(ctx, e, local, a.Name); err != nil {
				m.log.Warn("remove ingested artifact", "session_id", e.id, "name", a.Name, "err", err)
				continue
			}
			delete(e.files, a.Name)
		}
	}
}

// stored counts the files whose content the blobstore holds already,
// before their batch commits: the dedup hits of the metrics.
func (m *Manager) stored(files []storedFile) int {
	n := 0
	for _, f := range files {
		if p, err := m.art.blobs.Path(f.sha); err == nil {
			if _, err := os.Stat(p); err == nil {
				n++
			}
		}
	}
	return n
}

// storedFile is a file ingestion put into the blobstore.
type storedFile struct {
	name, sha, mime string
	size            int64
}

// ingestWorkers is how many files of a session folder on this host are
// read at once: opening, reading and hashing small files is CPU work, and
// the pack they go into takes them in any order.
const ingestWorkers = 4

// readArtifacts puts the accepted files into batch and returns what it
// stored, sorted by name, what it could not, and the names it looked at
// (those it never saw vanished meanwhile). Files are read on the host when
// the session's folder is here, through the engine otherwise.
func (m *Manager) readArtifacts(ctx context.Context, e *entry, batch *artifacts.Batch, accepted []string, maxFile int64) (stored []storedFile, skipped []Skipped, done map[string]bool) {
	var mu sync.Mutex // guards the three results
	done = make(map[string]bool, len(accepted))
	skip := func(name, reason string) {
		mu.Lock()
		defer mu.Unlock()
		done[name] = true
		skipped = append(skipped, Skipped{Name: name, Reason: reason})
	}
	put := func(name string, r io.Reader) error {
		head := &headBuffer{max: 512}
		sha, size, err := batch.Put(ctx, io.TeeReader(r, head), maxFile)
		var tooLarge *artifacts.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			skip(name, fmt.Sprintf("grew past %d MiB while being read (ARTIFACT_MAX_FILE_MB)", m.cfg.ArtifactMaxFileMB))
		case err != nil:
			m.log.Warn("ingest artifact", "session_id", e.id, "name", name, "err", err)
			skip(name, "store: "+m.storageTrouble(err, "the server's artifact store").Error())
		default:
			f := storedFile{name, sha, artifacts.DetectMIME(name, head.Bytes()), size}
			mu.Lock()
			done[name] = true
			stored = append(stored, f)
			mu.Unlock()
		}
		return nil
	}
	var err error
	if local := m.localSession(ctx, e); local != "" {
		err = readLocal(local, accepted, put, skip)
	} else if fr, ok := m.drv.(fileReader); ok {
		err = fr.ReadFiles(ctx, e.containerID, m.cfg.User, ArtifactsDir, accepted, put)
	} else {
		err = errors.New("the driver cannot read files out of a container")
	}
	if err != nil {
		m.log.Warn("read artifacts", "session_id", e.id, "err", err)
	}
	for _, name := range accepted {
		if !done[name] {
			reason := "vanished or stopped being a regular file before it could be read"
			if err != nil {
				reason = "could not be read: " + err.Error()
			}
			skip(name, reason)
		}
	}
	slices.SortFunc(stored, func(a, b storedFile) int { return strings.Compare(a.name, b.name) })
	slices.SortStableFunc(skipped, func(a, b Skipped) int { return strings.Compare(a.Name, b.Name) })
	return stored, skipped, done
}

// readLocal reads the files of the session folder local's artifacts, a few
// at a time, and hands each to put (or its failure to skip).
func readLocal(local string, names []string, put func(string, io.Reader) error, skip func(name, reason string)) error {
	root, err := openArtifacts(local)
	if err != nil {
		return err
	}
	defer root.Close()
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(ingestWorkers, len(names)) {
		wg.Go(func() {
			for name := range work {
				r, err := openRegular(root, name)
				if err != nil {
					skip(name, err.Error())
					continue
				}
				put(name, r)
				r.Close()
			}
		})
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	return nil
}

// openArtifacts opens the artifacts folder of the session folder local (see
// localSession) as an os.Root, through an os.Root at local: the code may
// have replaced /session/artifacts with a link, and a link to /etc, followed
// on the host, would be the host's /etc. A link that stays inside the
// session is followed; one that leads out fails.
func openArtifacts(local string) (*os.Root, error) {
	session, err := os.OpenRoot(local)
	if err != nil {
		return nil, err
	}
	defer session.Close()
	root, err := session.OpenRoot(path.Base(ArtifactsDir))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", ArtifactsDir, err)
	}
	return root, nil
}

// openFile opens a file of a session folder on the host, through an
// os.Root there, so that neither a symbolic link nor ".." leads outside it,
// and only if it is a regular file.
func (m *Manager) openFile(dir, name string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return openRegular(root, name)
}

// openRegular opens name under root if it is a regular file. The root keeps
// any link inside it; O_NONBLOCK keeps a FIFO from blocking the open, and the
// check after opening refuses it, a device or a folder.
func openRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// removeFile deletes an ingested file from the session (ARTIFACT_MOVE).
func (m *Manager) removeFile(ctx context.Context, e *entry, local, name string) error {
	if local != "" {
		root, err := openArtifacts(local)
		if err != nil {
			return err
		}
		defer root.Close()
		return root.Remove(name)
	}
	fr, ok := m.drv.(fileRemover)
	if !ok {
		return errors.New("the driver cannot remove files in a container")
	}
	return fr.RemoveFile(ctx, e.containerID, m.cfg.User, path.Join(ArtifactsDir, name))
}

// ingestFigures stores the PNG figures a result returned, so a text-only
// agent gets a URL for its chart (ARTIFACT_FIGURES).
func (m *Manager) ingestFigures(ctx context.Context, e *entry, res *Result) {
	n := 0
	for _, o := range res.Outputs {
		b64, ok := o.Data["image/png"]
		if !ok {
			continue
		}
		n++
		name := fmt.Sprintf("figures/cell-%d-%d.png", res.ExecutionCount, n)
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			res.SkippedArtifacts = append(res.SkippedArtifacts, Skipped{Name: name, Reason: "figure is not valid base64"})
			continue
		}
		sha, size, err := m.art.blobs.Put(ctx, bytes.NewReader(data))
		if err == nil {
			var a Artifact
			if a, err = m.addArtifact(ctx, e, name, sha, size, "image/png"); err == nil {
				res.Artifacts = append(res.Artifacts, a)
				continue
			}
		}
		res.SkippedArtifacts = append(res.SkippedArtifacts, Skipped{Name: name, Reason: err.Error()})
	}
}

func (m *Manager) addArtifact(ctx context.Context, e *entry, name, sha string, size int64, mime string) (Artifact, error) {
	a, err := m.art.index.Add(ctx, artifacts.Artifact{
		Namespace:  m.ns,
		SessionID:  e.id,
		SessionKey: e.key,
		Name:       name,
		SHA256:     sha,
		Size:       size,
		MIME:       mime,
	})
	if err != nil {
		return Artifact{}, fmt.Errorf("index: %w", err)
	}
	return m.describe(a), nil
}

// describe turns an index row into a result's artifact with a fresh URL.
func (m *Manager) describe(a artifacts.Artifact) Artifact {
	return Artifact{ID: a.ID, Name: a.Name, Size: a.Size, SHA256: a.SHA256, MIME: a.MIME, URL: m.url(a.ID)}
}

// resign gives recorded artifacts fresh download URLs (a replayed result's
// old ones may have expired).
func (m *Manager) resign(arts []Artifact) {
	for i := range arts {
		arts[i].URL = m.url(arts[i].ID)
	}
}

// url signs a download URL for artifact id, valid ARTIFACT_TOKEN_TTL_S from
// now; "" if it cannot be signed (the artifact is still listed).
func (m *Manager) url(id string) string {
	u, _, err := m.art.signer.URL(m.cfg.ArtifactPublicURL, id, time.Now())
	if err != nil {
		return ""
	}
	return u
}

// headBuffer keeps the first max bytes written to it (for MIME sniffing).
type headBuffer struct {
	buf []byte
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) Bytes() []byte { return h.buf }

// Artifacts lists the artifacts the session of key has made, newest first,
// each with a fresh download URL. The session need not be running.
func (m *Manager) Artifacts(ctx context.Context, key string) ([]Artifact, error) {
	if err := m.begin(); err != nil {
		return nil, err
	}
	defer m.calls.Done()
	if err := checkKey(key); err != nil {
		return nil, err
	}
	list, err := m.art.index.BySession(ctx, m.ns, ID(key))
	if err != nil {
		return nil, &Error{Op: "list artifacts", Key: key, Err: err}
	}
	out := make([]Artifact, 0, len(list))
	for _, a := range list {
		out = append(out, m.describe(a))
	}
	return out, nil
}
