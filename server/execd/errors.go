package execd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/session"
)

// Error codes of the OpenSandbox error shape {"code","message"}. The first
// ones are OpenSandbox execd's own; the others name what agentbox adds.
const (
	codeInvalidRequest  = "INVALID_REQUEST_BODY"
	codeMissingQuery    = "MISSING_QUERY"
	codeRuntime         = "RUNTIME_ERROR"
	codeInvalidFile     = "INVALID_FILE"
	codeInvalidMetadata = "INVALID_FILE_METADATA"
	codeFileNotFound    = "FILE_NOT_FOUND"
	codeContextNotFound = "CONTEXT_NOT_FOUND"
	codeNotSupported    = "NOT_SUPPORTED"

	codeUnauthorized     = "UNAUTHORIZED"
	codeForbidden        = "FORBIDDEN"
	codeTokenExpired     = "TOKEN_EXPIRED"
	codeKeyRevoked       = "KEY_REVOKED"
	codeSandboxRecreated = "SANDBOX_RECREATED"
	codeSandboxNotFound  = "SANDBOX_NOT_FOUND"
	codeSandboxPaused    = "SANDBOX_PAUSED"
	codeCommandNotFound  = "COMMAND_NOT_FOUND"
	codeNotFound         = "NOT_FOUND"
	codeMethod           = "METHOD_NOT_ALLOWED"
	codeTooLarge         = "REQUEST_TOO_LARGE"
	codeFileTooLarge     = "FILE_TOO_LARGE"
	codeRange            = "RANGE_NOT_SATISFIABLE"
	codePermission       = "PERMISSION_DENIED"
	codeFileExists       = "FILE_EXISTS"
	codeNotEmpty         = "DIRECTORY_NOT_EMPTY"
	codeNoSpace          = "NO_SPACE"
	codeUnavailable      = "SANDBOX_UNAVAILABLE"
	codeQuota            = "QUOTA_EXCEEDED"
)

// apiError is an error answer: its status and OpenSandbox-shaped body.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// writeError answers with e in OpenSandbox's shape.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}

// fromErr classifies an error of the Manager (or of reading the request)
// into a status and code. Messages are the error's own text (they name
// the sandbox path and the session key, never a token: publicErr puts the
// sandbox id in the key's place), except for the server's own failures,
// whose causes only the log has.
func fromErr(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var ce *session.CommandError
	var qe *session.QuotaError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &qe):
		return errorf(http.StatusTooManyRequests, codeQuota, "%v", qe)
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, codeTooLarge, "request body over %d bytes", mbe.Limit)
	case errors.As(err, &ce):
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%v", err)
	case errors.Is(err, session.ErrInvalidCommand), errors.Is(err, session.ErrInvalidKey):
		return errorf(http.StatusBadRequest, codeInvalidRequest, "%v", err)
	case errors.Is(err, session.ErrBadPath):
		return errorf(http.StatusBadRequest, codeInvalidFile, "%v", err)
	case errors.Is(err, session.ErrFileNotFound), errors.Is(err, fs.ErrNotExist):
		return errorf(http.StatusNotFound, codeFileNotFound, "%v", err)
	case errors.Is(err, session.ErrIsDir), errors.Is(err, session.ErrNotDir), errors.Is(err, session.ErrNotRegular):
		return errorf(http.StatusBadRequest, codeInvalidFile, "%v", err)
	case errors.Is(err, session.ErrPermission):
		return errorf(http.StatusForbidden, codePermission, "%v", err)
	case errors.Is(err, session.ErrFileExists):
		return errorf(http.StatusConflict, codeFileExists, "%v", err)
	case errors.Is(err, session.ErrNotEmpty):
		return errorf(http.StatusConflict, codeNotEmpty, "%v", err)
	case errors.Is(err, session.ErrFileTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, codeFileTooLarge, "%v", err)
	case errors.Is(err, session.ErrNoSpace):
		return errorf(http.StatusInsufficientStorage, codeNoSpace, "%v", err)
	case errors.Is(err, session.ErrPaused):
		// publicErr names the sandbox; this is what a caller without
		// one (none today) would say.
		return errorf(http.StatusConflict, codeSandboxPaused, "sandbox is paused: resume it first")
	case errors.Is(err, session.ErrExpired):
		return errorf(http.StatusNotFound, codeSandboxNotFound, "sandbox expired: %v", err)
	case errors.Is(err, session.ErrNotFound), errors.Is(err, session.ErrSessionLost):
		return errorf(http.StatusNotFound, codeSandboxNotFound, "sandbox not found: %v", err)
	case errors.Is(err, session.ErrUnknownCommand):
		return errorf(http.StatusNotFound, codeCommandNotFound, "%v", err)
	case errors.Is(err, session.ErrUnavailable), errors.Is(err, session.ErrClosed):
		return errorf(http.StatusServiceUnavailable, codeUnavailable, "the sandbox engine is unavailable (or the server is shutting down); try again later")
	case errors.Is(err, session.ErrStorageFull):
		return errorf(http.StatusInsufficientStorage, codeNoSpace, "the server's disk is full: the operator must make room; try again later")
	default:
		// The cause may name the server's own files (ARTIFACTS_DB and
		// the like): it goes to the log, not to the tenant.
		return errorf(http.StatusInternalServerError, codeRuntime, "internal error in the sandbox server; the server log has the cause")
	}
}

// publicErr is fromErr with a message for the API user: it names the
// sandbox by its id, never by the session key the server makes of it (the
// tenant's hash and a separator), and a paused sandbox by the API call that
// resumes it, not by the Manager's words for library users (Go methods,
// the CLI).
func publicErr(c *call, err error) *apiError {
	if errors.Is(err, session.ErrPaused) {
		return pausedErr(c.id)
	}
	e := *fromErr(err)
	// Each session error of the chain, outermost first, says "session
	// <key>" (cut short when long, so replacing the key alone would not
	// do): its text is replaced by one that names the sandbox.
	for cur := err; cur != nil; cur = errors.Unwrap(cur) {
		switch se := cur.(type) {
		case *session.FileError:
			e.Message = strings.ReplaceAll(e.Message, se.Error(), fmt.Sprintf("sandbox %s: %s %q: %v", c.id, se.Op, se.Path, se.Err))
		case *session.Error:
			e.Message = strings.ReplaceAll(e.Message, se.Error(), fmt.Sprintf("sandbox %s: %s: %v", c.id, se.Op, se.Err))
		}
	}
	// What the causes may still hold (an error built from another).
	e.Message = strings.ReplaceAll(e.Message, c.key, c.id)
	return &e
}

// pausedErr is the answer of every route while sandbox id is paused.
func pausedErr(id string) *apiError {
	return errorf(http.StatusConflict, codeSandboxPaused,
		"sandbox %s is paused: resume it first (POST /v1/sandboxes/%s/resume, the SDK's resume)", id, id)
}
