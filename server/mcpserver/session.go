package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionName splits a call's arguments into the tool's own input and the
// name of the session it is for: the "session" argument, else the
// X-Agentbox-Session header, else the MCP session's id, else
// DefaultSession. A null or empty "session" counts as absent (models send
// both for an optional argument they do not use). problem explains, for
// the model, a name that cannot be used.
func sessionName(req *mcp.CallToolRequest) (input json.RawMessage, name, problem string) {
	input = req.Params.Arguments
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		input = json.RawMessage(`{}`)
	} else if args := map[string]json.RawMessage{}; json.Unmarshal(trimmed, &args) == nil {
		// Input that is not an object goes to the tool as it is: the tool
		// explains what it expected.
		if raw, ok := args["session"]; ok {
			delete(args, "session")
			var err error
			if input, err = json.Marshal(args); err != nil {
				return nil, "", fmt.Sprintf("Invalid input: %v.", err)
			}
			var v *string
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, "", `Invalid input: "session" must be a string naming the sandbox session, such as "analysis".`
			}
			if v != nil && *v != "" {
				if p := checkName(*v); p != "" {
					return nil, "", `Invalid input: "session" ` + p + `.`
				}
				return input, *v, ""
			}
		}
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if h := req.Extra.Header.Get(SessionHeader); h != "" {
			if p := checkName(h); p != "" {
				return nil, "", "The " + SessionHeader + " header " + p + "."
			}
			return input, h, ""
		}
	}
	if req.Session != nil {
		if id := req.Session.ID(); id != "" {
			return input, id, ""
		}
	}
	return input, DefaultSession, ""
}

// checkName says what is wrong with a session name, "" if nothing.
func checkName(name string) string {
	if len(name) > maxSessionName {
		return fmt.Sprintf("is %d bytes long; a session name has at most %d", len(name), maxSessionName)
	}
	if !utf8.ValidString(name) {
		return "is not UTF-8 text"
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("holds the unprintable character %q; a session name is printable text", r)
		}
	}
	return ""
}

type keyCtx struct{}

type callSession struct {
	key  string // what the Manager is given: the tenant's key of name
	name string // what the caller called it
}

func withKey(ctx context.Context, key, name string) context.Context {
	return context.WithValue(ctx, keyCtx{}, callSession{key: key, name: name})
}

func sessionOf(ctx context.Context) (callSession, bool) {
	s, ok := ctx.Value(keyCtx{}).(callSession)
	return s, ok
}

// errNoSession means a tool ran outside a handler of this package: a bug.
var errNoSession = errors.New("no session in the call's context")

// keyFromContext is the tools package's SessionKey.
func keyFromContext(ctx context.Context) (string, error) {
	s, ok := sessionOf(ctx)
	if !ok {
		return "", errNoSession
	}
	return s.key, nil
}
