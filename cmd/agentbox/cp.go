package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/termsafe"
	"github.com/agentbox/agentbox/session"
)

// runCp is `agentbox cp SRC DST`, like docker cp: one side is KEY:PATH in
// a session, the other a local path or - (a tar stream on standard input
// or output). Files and folders; links and other special files in a
// folder are skipped and counted, never followed.
//
// A missing file, a permission the sandbox user lacks or a cap exits 1 (the
// thing asked for cannot be done); a failing sandbox exits 3.
func runCp(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("cp")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "agentbox: cp: want SRC and DST, one of them KEY:PATH (see agentbox help)")
		return exitUsage
	}
	srcKey, srcPath, srcRemote := remoteSpec(fs.Arg(0))
	dstKey, dstPath, dstRemote := remoteSpec(fs.Arg(1))
	if srcRemote == dstRemote {
		fmt.Fprintln(stderr, "agentbox: cp: exactly one of SRC and DST must be KEY:PATH, a path in a session (see agentbox help)")
		return exitUsage
	}
	m, status := openManager(ctx, stderr)
	if m == nil {
		return status
	}
	defer closeManager(ctx, m, stderr)
	c := &copier{ctx: ctx, m: m, stderr: stderr}
	var err error
	var where string
	if dstRemote {
		where = dstKey + ":" + dstPath
		c.key = dstKey
		if srcPath == "-" {
			err = c.untarIn(stdin, dstPath)
		} else {
			err = c.copyIn(srcPath, dstPath)
		}
	} else {
		where = dstPath
		c.key = srcKey
		if dstPath == "-" {
			err = c.tarOut(srcPath, stdout)
			where = "standard output"
		} else {
			err = c.copyOut(srcPath, dstPath)
		}
	}
	out := stdout
	if dstPath == "-" {
		out = stderr // stdout is the tar stream
	}
	if c.files > 0 || err == nil {
		fmt.Fprintf(out, "copied %d %s (%s) to %s%s\n", c.files, plural(c.files, "file", "files"), sizeText(c.bytes), termsafe.Line(where), c.skippedNote())
	}
	if err != nil {
		return fileFailure(ctx, stderr, "cp", err)
	}
	return exitOK
}

// remoteSpec splits KEY:PATH. The key ends at the first ":/" (so that a key
// may hold colons, as "user:42:/session/x"), else at the first ":". A path
// starting with /, ./ or ../, and -, are local.
func remoteSpec(s string) (key, p string, remote bool) {
	if s == "-" || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") {
		return "", s, false
	}
	i := strings.Index(s, ":/")
	if i < 0 {
		i = strings.IndexByte(s, ':')
	}
	if i <= 0 {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

// fileFailure prints a files API error and returns its exit status: 1 for
// what the caller asked that cannot be done, 3 for a failing sandbox.
func fileFailure(ctx context.Context, stderr io.Writer, cmd string, err error) int {
	for _, target := range []error{session.ErrFileNotFound, session.ErrIsDir, session.ErrNotDir, session.ErrNotRegular,
		session.ErrPermission, session.ErrFileExists, session.ErrNotEmpty, session.ErrFileTooLarge, session.ErrNoSpace,
		session.ErrBadPath, session.ErrNotFound, session.ErrPaused, errLocal} {
		if errors.Is(err, target) {
			fmt.Fprintf(stderr, "agentbox: %s: %s\n", cmd, oneLine(err))
			return exitFailed
		}
	}
	return failure(ctx, stderr, err)
}

// errLocal marks a failure on this machine's side of a copy.
var errLocal = errors.New("local")

type localError struct{ err error }

func (e localError) Error() string   { return e.err.Error() }
func (e localError) Unwrap() []error { return []error{e.err, errLocal} }
func local(err error) error {
	if err == nil {
		return nil
	}
	return localError{err}
}
func (c *copier) skippedNote() string {
	if c.skipped == 0 {
		return ""
	}
	return fmt.Sprintf("; skipped %d %s (links, pipes, devices)", c.skipped, plural(c.skipped, "entry", "entries"))
}

// copier counts what one cp moved.
type copier struct {
	ctx     context.Context
	m       *session.Manager
	key     string
	stderr  io.Writer
	files   int
	bytes   int64
	skipped int
}

// copyIn copies a local file or folder into the session. Into an existing
// folder (or a path ending in /) it goes under its own name, as with cp.
func (c *copier) copyIn(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return local(err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = os.Stat(src); err != nil { // a link named on the command line is the user's choice
			return local(err)
		}
	}
	dst = c.remoteTarget(dst, filepath.Base(src))
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return local(fmt.Errorf("%s: not a regular file", src))
		}
		return c.write([]session.FileWrite{{Path: dst, Mode: fi.Mode().Perm(), Data: &lazyFile{path: src}}})
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		return local(err)
	}
	defer root.Close()
	var writes []session.FileWrite
	var dirs []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return local(err)
		}
		target := path.Join(dst, filepath.ToSlash(p))
		switch {
		case d.IsDir():
			dirs = append(dirs, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return local(err)
			}
			writes = append(writes, session.FileWrite{Path: target, Mode: info.Mode().Perm(), Data: &lazyFile{root: root, path: p}})
		default:
			c.skipped++
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs := []error{c.write(writes)}
	// A file's folders are made with it; only empty ones are left to make.
	made := map[string]bool{}
	for _, w := range writes {
		for d := path.Dir(w.Path); !made[d] && d != "/"; d = path.Dir(d) {
			made[d] = true
		}
	}
	for _, d := range dirs {
		if !made[d] {
			errs = append(errs, c.m.MakeDir(c.ctx, c.key, d, 0))
		}
	}
	return errors.Join(errs...)
}

// remoteTarget is dst, or dst/name when dst is a folder in the session.
func (c *copier) remoteTarget(dst, name string) string {
	if strings.HasSuffix(dst, "/") {
		return path.Join(dst, name)
	}
	if fi, err := c.m.StatFile(c.ctx, c.key, dst); err == nil && fi.Type == session.TypeDir {
		return path.Join(dst, name)
	}
	return dst
}

func (c *copier) write(writes []session.FileWrite) error {
	res, err := c.m.WriteFiles(c.ctx, c.key, writes)
	return errors.Join(c.count(res, err)...)
}

// count adds the files written to the totals and returns the failures.
func (c *copier) count(res []session.WriteResult, err error) []error {
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, r.Err)
			continue
		}
		c.files++
		c.bytes += r.Size
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}

// lazyFile opens its file on the first read and closes it at the end, so
// that a folder of many files holds one descriptor at a time.
type lazyFile struct {
	root *os.Root // nil: path is as given
	path string
	f    *os.File
	done bool
}

func (l *lazyFile) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if l.f == nil {
		var err error
		if l.root != nil {
			l.f, err = l.root.Open(l.path)
		} else {
			l.f, err = os.Open(l.path)
		}
		if err != nil {
			return 0, local(err)
		}
	}
	n, err := l.f.Read(p)
	if err != nil {
		l.f.Close()
		l.done = true
	}
	return n, err
}

// untarIn unpacks a tar stream into the folder dst in the session, in one
// WriteFileSeq call (each file's reader is the tar reader, positioned on
// it): regular files and folders; anything else is skipped and counted.
func (c *copier) untarIn(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	var dirs []string
	var readErr error
	seq := func(yield func(session.FileWrite) bool) {
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				readErr = local(fmt.Errorf("read the tar stream: %w", err))
				return
			}
			name := path.Clean("/" + hdr.Name)[1:]
			if name == "" {
				continue
			}
			switch hdr.Typeflag {
			case tar.TypeDir:
				dirs = append(dirs, path.Join(dst, name))
			case tar.TypeReg:
				if !yield(session.FileWrite{Path: path.Join(dst, name), Mode: hdr.FileInfo().Mode().Perm(), Data: tr}) {
					return
				}
			default:
				c.skipped++
			}
		}
	}
	res, err := c.m.WriteFileSeq(c.ctx, c.key, seq)
	errs := c.count(res, err)
	// Folders the files made exist already; empty ones are made here.
	for _, d := range dirs {
		if err := c.m.MakeDir(c.ctx, c.key, d, 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, readErr)...)
}

// copyOut copies a file or folder of the session to a local path. Into an
// existing local folder it goes under its own name. Everything is written
// through an os.Root at the local destination, and names come from the
// session's listing, so nothing the sandbox named can land outside it.
func (c *copier) copyOut(src, dst string) error {
	info, err := c.m.StatFile(c.ctx, c.key, src)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, path.Base(info.Path))
	}
	if info.Type == session.TypeFile {
		parent, err := os.OpenRoot(filepath.Dir(dst))
		if err != nil {
			return local(err)
		}
		defer parent.Close()
		return c.readTo(parent, filepath.Base(dst), info)
	}
	if info.Type != session.TypeDir {
		return fmt.Errorf("%s: %w (a %s)", src, session.ErrNotRegular, info.Type)
	}
	if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return local(err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return local(err)
	}
	defer root.Close()
	list, err := c.m.ListFiles(c.ctx, c.key, info.Path, session.ListOptions{Recursive: true, Limit: session.MaxListLimit})
	if err != nil {
		return err
	}
	if list.Truncated {
		return fmt.Errorf("%s has more than %d entries: copy its folders one by one", src, session.MaxListLimit)
	}
	for _, e := range list.Entries {
		rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, info.Path), "/")
		switch e.Type {
		case session.TypeDir:
			if err := root.MkdirAll(rel, 0o755); err != nil {
				return local(err)
			}
		case session.TypeFile:
			if err := c.readTo(root, rel, e); err != nil {
				return err
			}
		default:
			c.skipped++
		}
	}
	return nil
}

func (c *copier) readTo(root *os.Root, name string, info session.FileInfo) error {
	r, err := c.m.ReadFile(c.ctx, c.key, info.Path, 0, -1)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode.Perm())
	if err != nil {
		return local(err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = local(cerr)
	}
	if err != nil {
		return err
	}
	c.files++
	c.bytes += n
	return nil
}

// tarOut writes a file or folder of the session as a tar stream.
func (c *copier) tarOut(src string, w io.Writer) error {
	info, err := c.m.StatFile(c.ctx, c.key, src)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	base := path.Base(info.Path)
	entries := []session.FileInfo{info}
	if info.Type == session.TypeDir {
		list, err := c.m.ListFiles(c.ctx, c.key, info.Path, session.ListOptions{Recursive: true, Limit: session.MaxListLimit})
		if err != nil {
			return err
		}
		entries = append(entries, list.Entries...)
	}
	for _, e := range entries {
		name := path.Join(base, strings.TrimPrefix(e.Path, info.Path))
		hdr := &tar.Header{Name: name, Mode: int64(e.Mode.Perm()), ModTime: e.ModTime, Uid: 1000, Gid: 1000}
		switch e.Type {
		case session.TypeDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return local(err)
			}
		case session.TypeFile:
			r, err := c.m.ReadFile(c.ctx, c.key, e.Path, 0, -1)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, r.Length
			if err := tw.WriteHeader(hdr); err != nil {
				r.Close()
				return local(err)
			}
			n, err := io.Copy(tw, r)
			r.Close()
			if err != nil {
				return err
			}
			c.files++
			c.bytes += n
		default:
			c.skipped++
		}
	}
	return local(tw.Close())
}

// sizeText says n bytes for people.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d %s", n, plural(int(n), "byte", "bytes"))
}
