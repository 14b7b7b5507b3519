package execd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/session"
)

// fileInfo is OpenSandbox's FileInfo. Mode is the permission bits written
// in octal digits read as a decimal number (0644 is 644), as the SDK
// expects; created_at is the modification time (the sandbox does not keep
// a birth time).
type fileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	Mode       int       `json:"mode"`
}

func (h *Handler) info(fi session.FileInfo) fileInfo {
	t := "other"
	switch fi.Type {
	case session.TypeFile:
		t = "file"
	case session.TypeDir:
		t = "directory"
	case session.TypeSymlink:
		t = "symlink"
	}
	mt := fi.ModTime.UTC()
	return fileInfo{Path: fi.Path, Type: t, Size: fi.Size, ModifiedAt: mt, CreatedAt: mt,
		Owner: h.opts.FileOwner, Group: h.opts.FileOwner, Mode: modeDigits(fi.Mode)}
}

// modeDigits writes permission bits as OpenSandbox does: the octal digits
// as a decimal number (0755 is 755, setuid 04755 is 4755).
func modeDigits(m fs.FileMode) int {
	n := uint64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	d, _ := strconv.Atoi(strconv.FormatUint(n, 8))
	return d
}

// parseMode reads OpenSandbox's mode (octal digits as a decimal number);
// 0 means the default.
func parseMode(d int) (fs.FileMode, error) {
	if d == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(strconv.Itoa(d), 8, 32)
	if err != nil || d < 0 || n > 0o7777 {
		return 0, errorf(http.StatusBadRequest, codeInvalidMetadata, "invalid mode %d: want octal digits such as 644 or 755", d)
	}
	m := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// paths returns the path query parameters, at least one.
func paths(c *call) ([]string, error) {
	ps := c.r.URL.Query()["path"]
	if len(ps) == 0 || slices.Contains(ps, "") {
		return nil, errorf(http.StatusBadRequest, codeMissingQuery, "missing query parameter 'path'")
	}
	return ps, nil
}

func onePath(c *call) (string, error) {
	p := c.r.URL.Query().Get("path")
	if p == "" {
		return "", errorf(http.StatusBadRequest, codeMissingQuery, "missing query parameter 'path'")
	}
	return p, nil
}

// fileMetadata is OpenSandbox's FileMetadata. Owner and group cannot be
// chosen: files belong to the sandbox user.
type fileMetadata struct {
	Path string `json:"path"`
	Mode int    `json:"mode"`
}

// maxMetadata caps one metadata part.
const maxMetadata = 64 << 10

// upload writes the files of a multipart request: each a "metadata" part
// (JSON: path, mode) followed by its "file" part. The parts stream into
// the sandbox one by one; nothing is held whole in memory. They are put
// in place together once the request is read and accepted, or not at all.
func (h *Handler) upload(c *call) error {
	if h.opts.MaxUploadBytes > 0 {
		c.r.Body = http.MaxBytesReader(c.w, c.r.Body, h.opts.MaxUploadBytes)
	}
	mr, err := c.r.MultipartReader()
	if err != nil {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "want a multipart/form-data body: %v", err)
	}
	var bad error
	files := 0
	seq := func(yield func(session.FileWrite) bool) {
		var meta *fileMetadata
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				bad = partErr("read multipart body", err)
				return
			}
			switch part.FormName() {
			case "metadata":
				if meta != nil {
					bad = errorf(http.StatusBadRequest, codeInvalidMetadata, "metadata for %q has no file part after it", meta.Path)
					return
				}
				b, err := io.ReadAll(io.LimitReader(part, maxMetadata+1))
				if err != nil {
					bad = partErr("read metadata part", err)
					return
				}
				var m fileMetadata
				if len(b) > maxMetadata {
					bad = errorf(http.StatusBadRequest, codeInvalidMetadata, "metadata part over %d bytes", maxMetadata)
					return
				}
				if err := json.Unmarshal(b, &m); err != nil {
					bad = errorf(http.StatusBadRequest, codeInvalidMetadata, "invalid metadata JSON: %v", err)
					return
				}
				if m.Path == "" {
					bad = errorf(http.StatusBadRequest, codeInvalidMetadata, "metadata without a path")
					return
				}
				meta = &m
			case "file":
				if meta == nil {
					bad = errorf(http.StatusBadRequest, codeInvalidFile, "file part without a metadata part before it")
					return
				}
				mode, err := parseMode(meta.Mode)
				if err != nil {
					bad = err
					return
				}
				files++
				if !yield(session.FileWrite{Path: meta.Path, Mode: mode, Data: part}) {
					return
				}
				meta = nil
			default:
				bad = errorf(http.StatusBadRequest, codeInvalidRequest, "unexpected multipart part %q: want metadata and file parts", part.FormName())
				return
			}
		}
		if meta != nil {
			bad = errorf(http.StatusBadRequest, codeInvalidMetadata, "metadata for %q has no file part after it", meta.Path)
		}
	}
	// All or nothing: a request refused (a file over a cap, a bad path, a
	// malformed part after some files) leaves none of its files written.
	res, err := h.m.WriteFileSeqAll(c.r.Context(), c.key, seq, func() error {
		if bad != nil {
			return bad
		}
		return nil
	})
	if bad != nil {
		return bad
	}
	if err != nil {
		return err
	}
	// The refused file's own error says why, not the others' "not
	// written".
	var first error
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, session.ErrNotWritten) {
			return r.Err
		}
		if r.Err != nil && first == nil {
			first = r.Err
		}
	}
	if first != nil {
		return first
	}
	if files == 0 {
		return errorf(http.StatusBadRequest, codeInvalidFile, "no file in the request")
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// partErr keeps a body over the cap a 413, anything else a 400.
func partErr(op string, err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return errorf(http.StatusBadRequest, codeInvalidRequest, "%s: %v", op, err)
}

// download serves a file: whole, one byte range (206), or lines
// offset..offset+limit-1 as text (offset counts from 1).
func (h *Handler) download(c *call) error {
	p, err := onePath(c)
	if err != nil {
		return err
	}
	q := c.r.URL.Query()
	rng := c.r.Header.Get("Range")
	if q.Has("offset") || q.Has("limit") {
		if rng != "" {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "offset/limit and the Range header cannot be used together")
		}
		return h.downloadLines(c, p)
	}
	hd := c.w.Header()
	hd.Set("Accept-Ranges", "bytes")
	if rng == "" {
		fr, err := h.m.ReadFile(c.r.Context(), c.key, p, 0, -1)
		if err != nil {
			return err
		}
		defer fr.Close()
		h.fileHeaders(c, fr)
		c.w.WriteHeader(http.StatusOK)
		h.copyOut(c, fr)
		return nil
	}
	st, err := h.m.StatFile(c.r.Context(), c.key, p)
	if err != nil {
		return err
	}
	if st.Type != session.TypeFile {
		return errorf(http.StatusBadRequest, codeInvalidFile, "%s is not a regular file", st.Path)
	}
	start, length, ok := parseRange(rng, st.Size)
	if !ok {
		hd.Set("Content-Range", fmt.Sprintf("bytes */%d", st.Size))
		return errorf(http.StatusRequestedRangeNotSatisfiable, codeRange, "range %q not satisfiable for a file of %d bytes (one range, bytes=start-end, bytes=start- or bytes=-suffix)", rng, st.Size)
	}
	fr, err := h.m.ReadFile(c.r.Context(), c.key, p, start, length)
	if err != nil {
		return err
	}
	defer fr.Close()
	h.fileHeaders(c, fr)
	hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", fr.Offset, fr.Offset+fr.Length-1, fr.Info.Size))
	c.w.WriteHeader(http.StatusPartialContent)
	h.copyOut(c, fr)
	return nil
}

func (h *Handler) fileHeaders(c *call, fr *session.FileReader) {
	hd := c.w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.FormatInt(fr.Length, 10))
	if d := mime.FormatMediaType("attachment", map[string]string{"filename": fr.Info.Name()}); d != "" {
		hd.Set("Content-Disposition", d)
	} else {
		hd.Set("Content-Disposition", "attachment")
	}
}

// copyOut streams the body; once it began, a failure can only cut it.
func (h *Handler) copyOut(c *call, r io.Reader) {
	if _, err := io.Copy(c.w, r); err != nil && c.r.Context().Err() == nil {
		h.log.Warn("execd: download cut", "sandbox", c.id, "err", err)
	}
}

// parseRange reads a single byte range of a file of size bytes.
func parseRange(h string, size int64) (start, length int64, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // suffix: the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, false
		}
		n = min(n, size)
		return size - n, n, true
	}
	s, err := strconv.ParseInt(a, 10, 64)
	if err != nil || s < 0 || s >= size {
		return 0, 0, false
	}
	end := size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil || e < s {
			return 0, 0, false
		}
		end = min(e, size-1)
	}
	return s, end - s + 1, true
}

// downloadLines answers lines offset..offset+limit-1 of a text file.
func (h *Handler) downloadLines(c *call, p string) error {
	q := c.r.URL.Query()
	num := func(name string, def int64) (int64, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return 0, errorf(http.StatusBadRequest, codeInvalidRequest, "invalid %s %q: want a whole number, 1 or more", name, v)
		}
		return n, nil
	}
	offset, err := num("offset", 1)
	if err != nil {
		return err
	}
	limit, err := num("limit", -1)
	if err != nil {
		return err
	}
	fr, err := h.m.ReadFile(c.r.Context(), c.key, p, 0, -1)
	if err != nil {
		return err
	}
	defer fr.Close()
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.w.Header().Set("X-Content-Type-Options", "nosniff")
	c.w.WriteHeader(http.StatusOK)
	br := bufio.NewReaderSize(fr, 64<<10)
	bw := bufio.NewWriterSize(c.w, 64<<10)
	defer bw.Flush()
	for n := int64(1); limit < 0 || n < offset+limit; n++ {
		line, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) { // a long line: pass it through
			if n >= offset {
				bw.Write(line)
			}
			line, err = br.ReadSlice('\n')
		}
		if n >= offset {
			bw.Write(line)
		}
		if err != nil {
			break
		}
	}
	return nil
}

func (h *Handler) filesInfo(c *call) error {
	ps, err := paths(c)
	if err != nil {
		return err
	}
	out := make(map[string]fileInfo, len(ps))
	for _, p := range ps {
		st, err := h.m.StatFile(c.r.Context(), c.key, p)
		if err != nil {
			return err
		}
		out[p] = h.info(st)
	}
	return writeJSON(c.w, out)
}

// removeFiles removes files (and links); folders are for DELETE
// /directories.
func (h *Handler) removeFiles(c *call) error {
	ps, err := paths(c)
	if err != nil {
		return err
	}
	for _, p := range ps {
		st, err := h.m.StatFile(c.r.Context(), c.key, p)
		if err != nil {
			return err
		}
		if st.Type == session.TypeDir {
			return errorf(http.StatusBadRequest, codeInvalidFile, "%s is a directory: remove it with DELETE /directories", st.Path)
		}
		if err := h.m.RemoveFile(c.r.Context(), c.key, p, false); err != nil {
			return err
		}
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// removeDirs removes folders and everything in them.
func (h *Handler) removeDirs(c *call) error {
	ps, err := paths(c)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := h.m.RemoveFile(c.r.Context(), c.key, p, true); err != nil {
			return err
		}
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// permission is OpenSandbox's Permission (owner and group are ignored:
// the sandbox user owns its files).
type permission struct {
	Mode int `json:"mode"`
}

func (h *Handler) makeDirs(c *call) error {
	var q map[string]permission
	if err := h.decode(c, &q); err != nil {
		return err
	}
	if len(q) == 0 {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "no directory in the request")
	}
	ps := make([]string, 0, len(q))
	for p := range q {
		ps = append(ps, p)
	}
	slices.Sort(ps) // parents first, and the same order every time
	for _, p := range ps {
		mode, err := parseMode(q[p].Mode)
		if err != nil {
			return err
		}
		if err := h.m.MakeDir(c.r.Context(), c.key, p, mode); err != nil {
			return err
		}
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

type renameItem struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
}

// move renames files and folders; an existing file at the destination is
// replaced, as rename(2) does.
func (h *Handler) move(c *call) error {
	var q []renameItem
	if err := h.decode(c, &q); err != nil {
		return err
	}
	for i, it := range q {
		if it.Src == "" || it.Dest == "" {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "item %d: src and dest are required", i)
		}
	}
	for _, it := range q {
		if err := h.m.MoveFile(c.r.Context(), c.key, it.Src, it.Dest, true); err != nil {
			return err
		}
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

// listDir lists a folder to a depth (1: its entries), each folder's
// entries in lexical order, descendants after their parent. Links are
// listed, never entered; a link as the folder itself is refused.
func (h *Handler) listDir(c *call) error {
	p, err := onePath(c)
	if err != nil {
		return err
	}
	depth := 1
	if v := c.r.URL.Query().Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, codeInvalidRequest, "invalid depth %q: want a whole number, 0 or more", v)
		}
		depth = max(n, 1)
	}
	st, err := h.m.StatFile(c.r.Context(), c.key, p)
	if err != nil {
		return err
	}
	switch st.Type {
	case session.TypeSymlink:
		return errorf(http.StatusBadRequest, codeInvalidFile, "%s is a symbolic link: list the folder it points to", st.Path)
	case session.TypeDir:
	default:
		return errorf(http.StatusBadRequest, codeInvalidFile, "%s is not a directory", st.Path)
	}
	list, err := h.m.ListFiles(c.r.Context(), c.key, st.Path, session.ListOptions{Recursive: depth > 1})
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(st.Path, "/") + "/"
	out := []fileInfo{}
	for _, e := range list.Entries {
		rel, ok := strings.CutPrefix(e.Path, base)
		if !ok || strings.Count(rel, "/")+1 > depth {
			continue
		}
		out = append(out, h.info(e))
	}
	slices.SortFunc(out, func(a, b fileInfo) int {
		return slices.Compare(strings.Split(a.Path, "/"), strings.Split(b.Path, "/"))
	})
	return writeJSON(c.w, out)
}

// search lists the files under a folder, at any depth, whose base name
// matches the glob pattern (default "**", everything).
func (h *Handler) search(c *call) error {
	p, err := onePath(c)
	if err != nil {
		return err
	}
	pat := c.r.URL.Query().Get("pattern")
	if pat == "" {
		pat = "**"
	}
	if _, err := path.Match(pat, ""); err != nil {
		return errorf(http.StatusBadRequest, codeInvalidRequest, "invalid pattern %q: %v", pat, err)
	}
	st, err := h.m.StatFile(c.r.Context(), c.key, p)
	if err != nil {
		return err
	}
	if st.Type != session.TypeDir {
		return errorf(http.StatusBadRequest, codeInvalidFile, "%s is not a directory", st.Path)
	}
	out := []fileInfo{}
	if strings.Contains(pat, "/") { // a base name has no slash: nothing matches
		return writeJSON(c.w, out)
	}
	// Within one element "**" is "*"; the Manager's ** means folders.
	elem := pat
	for strings.Contains(elem, "**") {
		elem = strings.ReplaceAll(elem, "**", "*")
	}
	list, err := h.m.Glob(c.r.Context(), c.key, strings.TrimSuffix(st.Path, "/")+"/**/"+elem, session.ListOptions{})
	if err != nil {
		return err
	}
	for _, e := range list.Entries {
		if ok, _ := path.Match(pat, e.Name()); ok && e.Type != session.TypeDir {
			out = append(out, h.info(e))
		}
	}
	return writeJSON(c.w, out)
}
