package artifacts

import (
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

// extTypes are the types of the file extensions sessions commonly write. The
// table is fixed, not mime.TypeByExtension, which reads the host's
// /etc/mime.types and so would differ from machine to machine.
var extTypes = map[string]string{
	".csv":     "text/csv",
	".tsv":     "text/tab-separated-values",
	".txt":     "text/plain",
	".log":     "text/plain",
	".md":      "text/markdown",
	".html":    "text/html",
	".htm":     "text/html",
	".css":     "text/css",
	".js":      "text/javascript",
	".py":      "text/x-python",
	".json":    "application/json",
	".jsonl":   "application/x-ndjson",
	".ndjson":  "application/x-ndjson",
	".geojson": "application/geo+json",
	".ipynb":   "application/x-ipynb+json",
	".xml":     "application/xml",
	".yaml":    "application/yaml",
	".yml":     "application/yaml",
	".parquet": "application/vnd.apache.parquet",
	".arrow":   "application/vnd.apache.arrow.file",
	".feather": "application/vnd.apache.arrow.file",
	".xlsx":    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".pdf":     "application/pdf",
	".zip":     "application/zip",
	".gz":      "application/gzip",
	".tar":     "application/x-tar",
	".npy":     "application/octet-stream",
	".npz":     "application/zip", // numpy's savez is a zip archive
	".pkl":     "application/octet-stream",
	".pickle":  "application/octet-stream",
	".png":     "image/png",
	".jpg":     "image/jpeg",
	".jpeg":    "image/jpeg",
	".gif":     "image/gif",
	".webp":    "image/webp",
	".svg":     "image/svg+xml",
	".mp3":     "audio/mpeg",
	".wav":     "audio/wav",
	".mp4":     "video/mp4",
}

// DetectMIME returns the media type of an artifact from its name and the
// first bytes of its content (512 are enough). A well-known extension wins,
// because sniffing cannot tell CSV from plain text or Parquet from any binary;
// other names get what http.DetectContentType sniffs. Text types get
// "; charset=utf-8" when head is valid UTF-8, and none when it is not, so a
// Latin-1 CSV is not mislabelled. Pass the whole content when it is shorter
// than 512 bytes: only a 512-byte head may end in a rune cut in two.
func DetectMIME(name string, head []byte) string {
	if len(head) > sniffLen {
		head = head[:sniffLen]
	}
	typ, ok := extTypes[strings.ToLower(path.Ext(name))]
	if !ok {
		sniffed := http.DetectContentType(head)
		mt, params, err := mime.ParseMediaType(sniffed)
		if err != nil {
			return "application/octet-stream"
		}
		if cs := params["charset"]; cs != "" && cs != "utf-8" {
			return sniffed // a byte order mark said UTF-16: keep what it says
		}
		typ = mt
	}
	if strings.HasPrefix(typ, "text/") && (utf8.Valid(head) || len(head) == sniffLen && validCutUTF8(head)) {
		return typ + "; charset=utf-8"
	}
	return typ
}

// sniffLen is how much of the content DetectMIME and http.DetectContentType
// look at.
const sniffLen = 512

// validCutUTF8 reports whether head is valid UTF-8 but for an incomplete rune
// at its very end, where taking a prefix of the content may cut one.
func validCutUTF8(head []byte) bool {
	// Drop at most the UTFMax-1 bytes of a cut rune: they start with a
	// leading byte that the cut left without all of its continuation bytes.
	for i := 1; i < utf8.UTFMax && i <= len(head); i++ {
		c := head[len(head)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(head[len(head)-i:]) {
				return utf8.Valid(head[:len(head)-i])
			}
			return false
		}
	}
	return false
}
