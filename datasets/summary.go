package datasets

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Limits of Summary: names and headers come from files the agent or a
// source wrote, and one listing line must stay short enough for a prompt.
const (
	maxSummaryColumns = 100 // columns listed before "... and N more"
	maxSummaryType    = 200 // bytes of one column's type
	maxSummaryName    = 64  // bytes of one column or header name
)

// Summary returns a one-line description for a person or a model, e.g.
//
//	sales.parquet: 48.2 KiB, 1200 rows, 3 row groups; columns: id int64, name string (nullable), tags list<string>
//	people.csv: 2.0 MiB, csv; columns: id, name, email
//	notes.bin: 10 B
//
// File, column and header names that are not plain are Go-quoted, so a name
// sandboxed code chose cannot forge lines or columns; long lists, types and
// column names are cut with "...".
func (i Info) Summary() string {
	var b strings.Builder
	b.WriteString(quoteFile(i.Name))
	b.WriteString(": ")
	b.WriteString(formatBytes(i.Size))
	switch {
	case i.Problem != "":
		fmt.Fprintf(&b, ", %s; unreadable: %s", i.Format, i.Problem)
	case i.Parquet != nil:
		p := i.Parquet
		fmt.Fprintf(&b, ", %s, %s", plural(p.Rows, "row"), plural(int64(p.RowGroups), "row group"))
		cols := make([]string, len(p.Columns))
		for j, c := range p.Columns {
			c.Type = cut(c.Type, maxSummaryType)
			cols[j] = c.describe()
		}
		writeColumns(&b, cols)
	case i.Format == FormatCSV:
		b.WriteString(", csv")
		cols := make([]string, len(i.CSVHeader))
		for j, h := range i.CSVHeader {
			cols[j] = quoteName(h)
		}
		writeColumns(&b, cols)
	case i.Format != FormatOther:
		b.WriteString(", ")
		b.WriteString(i.Format)
	}
	return b.String()
}

// writeColumns appends "; columns: a, b" with at most maxSummaryColumns.
func writeColumns(b *strings.Builder, cols []string) {
	if len(cols) == 0 {
		return
	}
	b.WriteString("; columns: ")
	b.WriteString(strings.Join(cols[:min(len(cols), maxSummaryColumns)], ", "))
	if more := len(cols) - maxSummaryColumns; more > 0 {
		fmt.Fprintf(b, ", ... and %d more", more)
	}
}

// quoteName returns a column name as is when it is plain (letters, digits,
// '_', '.', '-', and inner spaces), else Go-quoted so that commas, controls
// and empty names cannot garble the line; either way cut to maxSummaryName.
func quoteName(s string) string {
	s = cut(s, maxSummaryName)
	plain := s != "" && strings.TrimSpace(s) == s
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' || r == '-' || r == ' ') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}

// quoteFile returns a file name as is when it is printable, without
// surrounding spaces or the separators Summary uses, else Go-quoted.
func quoteFile(s string) string {
	plain := s != "" && strings.TrimSpace(s) == s && !strings.ContainsAny(s, ":;,\"\\")
	for _, r := range s {
		if !unicode.IsPrint(r) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}

// cut returns s cut to about max bytes on a rune boundary, marked "...".
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "..."
}

// plural returns "1 row" or "3 rows".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// formatBytes returns n in B, KiB, MiB or GiB, one decimal above bytes.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
