package main

import "strings"

// needsMore reports whether the repl should read another line before running
// src, the lines typed so far joined with "\n" (the last one just typed). It
// decides without Python on the host, by the rules of Python's own prompt:
//
//   - open brackets, an open triple-quoted string, or a line ending in a
//     backslash continue the input, even across blank lines;
//   - otherwise a blank line ends it;
//   - a line ending in ":" opens a block, read until a blank line, and a
//     decorator line waits for what it decorates;
//   - anything else is a complete statement.
//
// Input that can never be completed, such as an unmatched closing bracket or
// an unterminated one-line string, counts as complete, so that Python
// reports the SyntaxError instead of the prompt waiting forever.
func needsMore(src string) bool {
	lines := strings.Split(src, "\n")
	var (
		depth     int    // open brackets
		quote     string // the open string's delimiter: ', ", ''' or """
		blockOpen bool   // some line at depth 0 ended with ':'
		continued bool   // the last line ended with a backslash
	)
	for _, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		var last byte // last significant character outside strings and comments
		continued = false
	scan:
		for j := 0; j < len(line); j++ {
			c := line[j]
			if quote != "" {
				switch {
				case c == '\\':
					if j == len(line)-1 {
						continued = true // escaped newline: the string goes on
					}
					j++
				case strings.HasPrefix(line[j:], quote):
					j += len(quote) - 1
					quote = ""
					last = c
				}
				continue
			}
			switch c {
			case '#':
				break scan
			case '\'', '"':
				quote = string(c)
				if strings.HasPrefix(line[j:], strings.Repeat(quote, 3)) {
					quote = strings.Repeat(quote, 3)
					j += 2
				}
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
			if c != ' ' && c != '\t' {
				last = c
			}
		}
		if len(quote) == 1 && !continued {
			quote = "" // an unterminated string: Python will say so
		}
		if quote == "" && last == '\\' {
			continued = true
		}
		if quote == "" && depth == 0 && last == ':' {
			blockOpen = true
		}
	}
	lastLine := strings.TrimSpace(lines[len(lines)-1])
	switch {
	case depth > 0 || quote != "" || continued:
		return true
	case lastLine == "":
		return false
	case blockOpen:
		return true
	}
	return strings.HasPrefix(lastLine, "@")
}
