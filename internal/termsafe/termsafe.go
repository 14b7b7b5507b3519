package termsafe

import (
	"io"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String returns s with every character a terminal could act on written as
// an escape (see the package comment). Newlines and tabs stay, and so does
// a carriage return right before a newline.
func String(s string) string {
	if safe(s, false) {
		return s
	}
	b, _ := appendSafe(make([]byte, 0, len(s)+16), s, false, false)
	return string(b)
}

// Line is String for text that must stay on one line: newlines, tabs and
// carriage returns are escaped too (\n, \t, \r).
func Line(s string) string {
	if safe(s, true) {
		return s
	}
	b, _ := appendSafe(make([]byte, 0, len(s)+16), s, true, false)
	return string(b)
}

// Writer escapes what is written to it as String does and writes the
// result to an underlying writer. A write may end in the middle of a
// character or between the "\r" and "\n" of a line end; the Writer holds
// those bytes back until the next write tells what they are, or until
// Flush.
type Writer struct {
	w    io.Writer
	held []byte // a trailing '\r' or an incomplete UTF-8 sequence
	buf  []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it, except for the bytes it holds back. It
// returns len(p) on success.
func (w *Writer) Write(p []byte) (int, error) {
	s := string(w.held) + string(p)
	var n int
	w.buf, n = appendSafe(w.buf[:0], s, false, true)
	w.held = append(w.held[:0], s[n:]...)
	if len(w.buf) > 0 {
		if _, err := w.w.Write(w.buf); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (w *Writer) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush writes the bytes held back, escaped: a lone carriage return as \r,
// an incomplete character as \xNN.
func (w *Writer) Flush() error {
	if len(w.held) == 0 {
		return nil
	}
	w.buf, _ = appendSafe(w.buf[:0], string(w.held), false, false)
	w.held = w.held[:0]
	_, err := w.w.Write(w.buf)
	return err
}

// JSON returns data, text encoding/json produced, with DEL, the C1
// controls, the format characters and the line separators inside its
// strings written as \u escapes. It decodes to the same values; only the
// spelling changes. (Outside strings, JSON text is ASCII punctuation,
// literals, numbers and white space, so every such character is inside a
// string, where its escape means the same.)
func JSON(data []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(data); {
		r, n := rune(data[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(data[i:])
		}
		if r != 0x7f && (r < utf8.RuneSelf || (r == utf8.RuneError && n == 1) || !unsafeRune(r)) {
			i += n
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(data)+16)
		}
		out = append(out, data[last:i]...)
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			out = appendU4(appendU4(out, hi), lo)
		} else {
			out = appendU4(out, r)
		}
		i += n
		last = i
	}
	if out == nil {
		return data
	}
	return append(out, data[last:]...)
}

// unsafeRune reports whether a terminal could act on r, or r could hide or
// reorder the text around it: C0 and C1 controls, DEL, format characters
// other than the zero-width joiners, and the line and paragraph separators.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0xa0:
		return false
	case r == '\u200c', r == '\u200d':
		// Zero-width non-joiner and joiner: they only shape the letters or
		// emoji around them, and emoji sequences need them.
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// safe reports whether s needs no escape, for String (oneLine false) or
// Line.
func safe(s string, oneLine bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n', c == '\t':
				if oneLine {
					return false
				}
			case c == '\r':
				if oneLine || i+1 == len(s) || s[i+1] != '\n' {
					return false
				}
			case c < 0x20, c == 0x7f:
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r) {
			return false
		}
		i += n
	}
	return true
}

// appendSafe appends s to dst with escapes. With more (a Writer, whose next
// write may continue s) it stops before a trailing '\r' or incomplete UTF-8
// sequence; it returns how much of s it consumed.
func appendSafe(dst []byte, s string, oneLine, more bool) ([]byte, int) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case (c == '\n' || c == '\t') && !oneLine:
				dst = append(dst, c)
			case c == '\r' && !oneLine && i+1 < len(s) && s[i+1] == '\n':
				dst = append(dst, c)
			case c == '\r' && !oneLine && more && i+1 == len(s):
				return dst, i
			case c < 0x20, c == 0x7f:
				dst = appendControl(dst, c)
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			if more && !utf8.FullRuneInString(s[i:]) {
				return dst, i
			}
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&0xf])
		case unsafeRune(r):
			if r > 0xffff {
				dst = append(dst, `\U`...)
				dst = appendHex(dst, uint32(r), 8)
			} else {
				dst = appendU4(dst, r)
			}
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst, len(s)
}

// appendControl appends the escape of the ASCII control c.
func appendControl(dst []byte, c byte) []byte {
	switch c {
	case '\a':
		return append(dst, `\a`...)
	case '\b':
		return append(dst, `\b`...)
	case '\f':
		return append(dst, `\f`...)
	case '\n':
		return append(dst, `\n`...)
	case '\r':
		return append(dst, `\r`...)
	case '\t':
		return append(dst, `\t`...)
	case '\v':
		return append(dst, `\v`...)
	}
	return append(dst, '\\', 'x', hex[c>>4], hex[c&0xf])
}

func appendU4(dst []byte, r rune) []byte {
	dst = append(dst, `\u`...)
	return appendHex(dst, uint32(r), 4)
}

func appendHex(dst []byte, v uint32, digits int) []byte {
	s := strconv.FormatUint(uint64(v), 16)
	for range digits - len(s) {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}
