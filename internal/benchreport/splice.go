package main

import (
	"fmt"
	"strings"
)

// EndMarker closes every table's region; StartMarker opens table name's.
const EndMarker = "<!-- /bench -->"

func StartMarker(name string) string { return "<!-- bench:" + name + " -->" }

// Region returns the text between table name's markers in doc, and where
// it starts and ends. A missing, repeated or unclosed marker is an error
// naming it.
func Region(doc, name string) (body string, start, end int, err error) {
	open := StartMarker(name)
	i := strings.Index(doc, open)
	if i < 0 {
		return "", 0, 0, fmt.Errorf("no %s marker", open)
	}
	if strings.Contains(doc[i+len(open):], open) {
		return "", 0, 0, fmt.Errorf("%s appears twice", open)
	}
	start = i + len(open)
	j := strings.Index(doc[start:], EndMarker)
	if j < 0 {
		return "", 0, 0, fmt.Errorf("%s has no %s after it", open, EndMarker)
	}
	end = start + j
	if k := strings.Index(doc[start:end], "<!-- bench:"); k >= 0 {
		return "", 0, 0, fmt.Errorf("%s is not closed by %s before the next table's marker", open, EndMarker)
	}
	return doc[start:end], start, end, nil
}

// Splice replaces what is between table name's markers with body, on lines
// of its own; everything outside the markers is kept as it is.
func Splice(doc, name, body string) (string, error) {
	_, start, end, err := Region(doc, name)
	if err != nil {
		return "", err
	}
	return doc[:start] + "\n" + strings.Trim(body, "\n") + "\n" + doc[end:], nil
}

// tableRows returns the rows of the Markdown table in region, by their
// first cell (trimmed): what a row that could not be measured keeps.
func tableRows(region string) map[string]string {
	rows := map[string]string{}
	for _, line := range strings.Split(region, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		first, _, ok := strings.Cut(line[2:], " |")
		if ok {
			rows[strings.TrimSpace(first)] = line
		}
	}
	return rows
}
