// Package termsafe makes text from a sandbox safe to print on a terminal.
//
// Anything a session produced (its output, error text, artifact and dataset
// names, variable names, even session keys and file names) may have been
// written by hostile code. Printed raw, an escape sequence can set the
// clipboard (OSC 52), rewrite the window title, clear the screen, hide
// earlier lines, or answer on the operator's behalf; a carriage return can
// overwrite a line; a bidi override can make "invoice\u202Efdp.exe" read as
// "invoiceexe.pdf". The commands in cmd/ pass such text through this
// package before it reaches a terminal in human-readable output.
//
// Characters a terminal could act on are written as escapes, the way a Go
// or C string literal writes them: the C0 controls other than newline and
// tab as \a \b \f \r \v or \xNN (ESC is \x1b), DEL as \x7f, a byte that is
// not UTF-8 as \xNN (a lone 0x9b is CSI to an 8-bit terminal), and the C1
// controls, the format characters (bidi embeddings, overrides, isolates and
// marks, zero-width spaces, tags; but not the zero-width joiners that
// emoji and some scripts need) and the line and paragraph separators as
// \uNNNN or \UNNNNNNNN. A backslash is left as it is: the escaped text is
// for reading, and the exact bytes are what JSON output is for.
//
// String keeps newlines and tabs, and a carriage return only right before a
// newline; Line escapes those too, for text that must stay on one line (a
// table cell, a one-line message). Writer is String for a stream written in
// pieces. JSON escapes, inside the strings of encoded JSON, what
// encoding/json leaves raw (DEL, C1, bidi controls).
//
// Everything here is a pure function of its input, safe for concurrent use,
// except a Writer, which one goroutine at a time may use.
package termsafe
