package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// decode reads a model's input into v, which lists every allowed field. It
// returns "" when the input is a single JSON object of the right shape, or a
// short explanation for the model; example shows a valid input.
func decode(input []byte, v any, example string) string {
	input = bytes.TrimSpace(input)
	if len(input) == 0 {
		input = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("extra data after the input object")
		}
	}
	if err == nil && input[0] != '{' {
		err = errors.New("the input must be a JSON object")
	}
	if err == nil {
		return ""
	}
	return invalid(describe(err), example)
}

// invalid is the reply to input that cannot be used.
func invalid(problem, example string) string {
	return fmt.Sprintf("Invalid input: %s. Expected a JSON object like %s.", problem, example)
}

func describe(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the input is not valid JSON"
	case errors.As(err, &typ) && typ.Field == "":
		return "the input must be a JSON object, not " + typ.Value
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, kind(typ.Type.Kind().String()), typ.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return cut(msg, 200)
}

func kind(k string) string {
	switch {
	case k == "string":
		return "a string"
	case strings.HasPrefix(k, "float"), strings.HasPrefix(k, "int"):
		return "a number"
	case k == "bool":
		return "a boolean"
	}
	return k
}

// cut shortens s to about max bytes, keeping its head and tail on UTF-8
// boundaries and saying how many bytes were cut from the middle.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head := max / 2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - (max - max/2)
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s\n[... %d bytes cut ...]\n%s", s[:head], tail-head, s[tail:])
}

// name quotes a name sandboxed code or a source chose when it is not plain,
// so it cannot forge lines of a reply.
func name(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

// size formats a byte count for a model.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if f < unit {
			break
		}
		f, u = f/unit, next
	}
	return fmt.Sprintf("%.1f %s", f, u)
}
