package datasets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxIDLength is the longest dataset id accepted, in bytes.
const MaxIDLength = 1024

// maxSlug is the most bytes of an id kept in a file name: readable, and far
// below the 255-byte limit of a name once the hash and extension are added.
const maxSlug = 80

// hashLen is how many hex digits of the id's SHA-256 a changed name carries:
// 40 bits, so distinct ids that slug alike do not meet by chance.
const hashLen = 10

// knownExts are the extensions SafeName keeps at the end of a name, lowercased,
// so that pandas, pyarrow and Describe still recognise the format.
var knownExts = []string{".parquet", ".csv", ".json", ".txt", ".arrow", ".feather"}

// checkID returns an error wrapping ErrInvalidID when id can name nothing.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: holds a NUL byte", ErrInvalidID)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidID, len(id), MaxIDLength)
	}
	return nil
}

// knownExt splits name into a stem and a known extension, lowercased; ext
// is "" when name has none.
func knownExt(name string) (stem, ext string) {
	lower := strings.ToLower(name)
	for _, e := range knownExts {
		if strings.HasSuffix(lower, e) {
			return name[:len(name)-len(e)], e
		}
	}
	return name, ""
}

// SafeName returns the file name under /session/data for the dataset id. Ids
// come from a model, so the name never leaves that folder: it is a single
// path element of ASCII letters, digits, '.', '_' and '-', not starting with
// '.' or '-' (no hidden files, "..", or command-line options), at most about
// 100 bytes. An id that is already such a name is returned unchanged; any
// other id keeps a readable slug of itself plus "-" and 10 hex digits of its
// SHA-256, so two ids never share a name (a plain id that merely looks
// hashed is hashed too). A known extension (.parquet, .csv, .json, .txt,
// .arrow, .feather, any case) stays at the end, lowercased. It returns an
// error wrapping ErrInvalidID for an empty id, one holding NUL, or one over
// MaxIDLength bytes.
func SafeName(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	stem, ext := knownExt(id)
	var b strings.Builder
	replaced := false
	for i := 0; i < len(stem); i++ {
		c := stem[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			replaced = false
			continue
		}
		// Anything else ('/', '\\', spaces, controls, each byte of UTF-8)
		// becomes one '_' per run, which keeps "a/b c" readable as "a_b_c".
		if !replaced {
			b.WriteByte('_')
			replaced = true
		}
	}
	slug := strings.TrimLeft(b.String(), "._-")
	slug = strings.TrimRight(slug, ".")
	if len(slug) > maxSlug {
		slug = strings.TrimRight(slug[:maxSlug], ".")
	}
	if slug != "" && slug+ext == id && !looksHashed(slug) {
		return id, nil
	}
	slug = strings.TrimRight(slug, "_-")
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:hashLen]
	if slug == "" {
		return "dataset-" + h + ext, nil
	}
	return slug + "-" + h + ext, nil
}

// looksHashed reports whether a slug ends like the ones SafeName makes for
// changed ids, "-" and hashLen lowercase hex digits. Such ids are hashed
// again so that no id can claim the name made for another.
func looksHashed(slug string) bool {
	if len(slug) < hashLen+1 || slug[len(slug)-hashLen-1] != '-' {
		return false
	}
	for _, c := range []byte(slug[len(slug)-hashLen:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
