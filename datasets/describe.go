package datasets

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/parquet-go/parquet-go"
)

// Formats Describe tells apart, by file extension.
const (
	FormatParquet = "parquet" // .parquet
	FormatCSV     = "csv"     // .csv
	FormatJSON    = "json"    // .json, .jsonl, .ndjson
	FormatOther   = "other"   // anything else
)

// Info describes one dataset file, enough for an agent to write correct
// code without opening it.
type Info struct {
	// Name is the file's path relative to the folder DescribeDir listed,
	// with forward slashes; Describe sets the base name.
	Name string
	// Path is the file's path on this host: the one given to Describe, or
	// the folder joined with Name.
	Path string
	// Size is in bytes.
	Size int64
	// Format is FormatParquet, FormatCSV, FormatJSON or FormatOther.
	Format string
	// Parquet is the footer's summary of a Parquet file; nil for other
	// formats and unreadable files.
	Parquet *ParquetInfo
	// CSVHeader is the first line of a CSV file, split into fields; nil for
	// other formats and empty files.
	CSVHeader []string
	// Problem says why DescribeDir could not describe the content (where
	// Describe returns an error); "" when it could.
	Problem string
}

// ParquetInfo is what a Parquet file's footer says about its content.
type ParquetInfo struct {
	Rows      int64    // rows in the whole file
	RowGroups int      // row groups in the file
	Columns   []Column // top-level columns, in schema order
}

// maxFooter bounds the footer Describe reads, in bytes: its length is read
// from the untrusted file, and real footers are far smaller (about 100
// bytes per column chunk). checkFooter bounds what decoding it costs.
const maxFooter = 16 << 20

// maxCSVLine is the most bytes of a CSV file Describe reads for its header.
const maxCSVLine = 64 << 10

// maxDirFiles is the most files DescribeDir describes: the folder may be
// written by sandboxed code, which can make millions of files.
const maxDirFiles = 10000

// Describe describes the file at path. It reads only a Parquet file's footer
// and a CSV file's first line, never row data. When the content is not the
// format its extension claims it returns the Info known so far (Name, Path,
// Size, Format) and an error wrapping ErrFormat. path is trusted: it is
// opened as given, symbolic links followed; use DescribeDir for folders
// that sandboxed code writes.
func Describe(p string) (Info, error) {
	// O_NONBLOCK keeps a FIFO from blocking the open; regular files
	// ignore it.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Info{}, fmt.Errorf("describe: %w", err)
	}
	defer f.Close()
	info, err := describeFile(f, filepath.Base(p), p)
	if err != nil {
		return info, fmt.Errorf("describe %s: %w", p, err)
	}
	return info, nil
}

// DescribeDir describes the regular files under dir, in subfolders too, in
// lexical order of their Names. It skips names starting with "." (hidden
// files, checkpoints), symbolic links, devices and pipes, and never opens a
// file outside dir, whatever links sandboxed code planted (it reads through
// an os.Root). A file whose content cannot be described is listed with
// Problem set. It stops after 10 000 files, returning them with an error.
// Other errors are about dir itself.
func DescribeDir(dir string) ([]Info, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("describe folder: %w", err)
	}
	defer root.Close()
	var names []string
	var tooMany error
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if name == "." {
			return err // the folder itself is unreadable
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return nil // an unreadable subfolder, a link, a device...
		}
		if len(names) == maxDirFiles {
			tooMany = fmt.Errorf("more than %d files", maxDirFiles)
			return fs.SkipAll
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe folder %s: %w", dir, err)
	}

	// Decoding a footer costs CPU (a footer of many row groups takes
	// milliseconds), so files are described in parallel, in order; by a few
	// workers only, as a hostile footer may cost up to maxDecoded memory.
	infos := make([]Info, len(names))
	ok := make([]bool, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), 4, len(names)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				infos[i], ok[i] = describeIn(root, names[i], filepath.Join(dir, filepath.FromSlash(names[i])))
			}
		})
	}
	wg.Wait()
	kept := infos[:0]
	for i := range infos {
		if ok[i] {
			kept = append(kept, infos[i])
		}
	}
	if tooMany != nil {
		return kept, fmt.Errorf("describe folder %s: %w", dir, tooMany)
	}
	return kept, nil
}

// describeIn describes the file name in root, reporting false when it is
// gone or is no longer a regular file.
func describeIn(root *os.Root, name, hostPath string) (Info, bool) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Info{}, false
	}
	defer f.Close()
	info, err := describeFile(f, name, hostPath)
	if errors.Is(err, errNotRegular) {
		return Info{}, false
	}
	if err != nil {
		info.Problem = err.Error()
	}
	return info, true
}

var errNotRegular = errors.New("not a regular file")

// describeFile describes the open file f named name.
func describeFile(f *os.File, name, hostPath string) (Info, error) {
	fi, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if !fi.Mode().IsRegular() {
		return Info{}, errNotRegular
	}
	info := Info{Name: name, Path: hostPath, Size: fi.Size(), Format: formatOf(name)}
	switch info.Format {
	case FormatParquet:
		info.Parquet, err = describeParquet(f, info.Size)
	case FormatCSV:
		info.CSVHeader, err = csvHeader(f)
	}
	return info, err
}

// formatOf tells the format by the name's extension, in any letter case.
func formatOf(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".parquet":
		return FormatParquet
	case ".csv":
		return FormatCSV
	case ".json", ".jsonl", ".ndjson":
		return FormatJSON
	}
	return FormatOther
}

// describeParquet reads a Parquet file's footer. It checks the footer's
// length itself before parquet-go allocates it, and turns a panic in
// parquet-go on a malformed footer into an error: the file is untrusted.
func describeParquet(f *os.File, size int64) (pi *ParquetInfo, err error) {
	if size < 12 {
		return nil, fmt.Errorf("%w: %d bytes is too short for Parquet", ErrFormat, size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return nil, err
	}
	switch string(tail[4:]) {
	case "PAR1":
	case "PARE":
		return nil, errors.New("encrypted Parquet footer: not supported")
	default:
		return nil, fmt.Errorf(`%w: no Parquet magic "PAR1" at the end`, ErrFormat)
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footerLen > size-12 || footerLen > maxFooter {
		return nil, fmt.Errorf("%w: Parquet footer length %d does not fit", ErrFormat, footerLen)
	}
	footer := make([]byte, footerLen+8)
	if _, err := f.ReadAt(footer, size-footerLen-8); err != nil {
		return nil, err
	}
	if err := checkFooter(footer[:footerLen]); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			pi, err = nil, fmt.Errorf("%w: malformed Parquet footer: %v", ErrFormat, r)
		}
	}()
	// Skipping the page index and bloom filters leaves only the footer to
	// read, which is in memory already.
	pf, err := parquet.OpenFile(&tailReaderAt{f: f, off: size - footerLen - 8, tail: footer}, size,
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	md := pf.Metadata()
	cols, err := columnsOf(md.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: Parquet schema: %w", ErrFormat, err)
	}
	return &ParquetInfo{Rows: md.NumRows, RowGroups: len(md.RowGroups), Columns: cols}, nil
}

// tailReaderAt is a file whose tail, from off, is in memory.
type tailReaderAt struct {
	f    io.ReaderAt
	off  int64
	tail []byte
}

func (r *tailReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.off && off+int64(len(p)) <= r.off+int64(len(r.tail)) {
		return copy(p, r.tail[off-r.off:]), nil
	}
	return r.f.ReadAt(p, off)
}

// csvHeader returns the fields of the first line of a CSV file, read
// without its byte order mark; nil for an empty file.
func csvHeader(f *os.File) ([]string, error) {
	buf := make([]byte, maxCSVLine)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	line := bytes.TrimPrefix(buf[:n], []byte("\xef\xbb\xbf"))
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true // a header is worth showing even when sloppily quoted
	fields, err := r.Read()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: CSV header: %w", ErrFormat, err)
	}
	return fields, nil
}
