// Package native is agentbox's own small HTTP API, served under
// /v1/agentbox/: what the OpenSandbox-compatible API has no words for.
// Executions carry ids that run exactly once (the same id again answers the
// recorded result), run on when the client goes away (their result is
// fetched later by id), and stream as server-sent events that a client
// resumes with Last-Event-ID. Artifacts are listed with signed download
// URLs, and datasets are listed and selected.
//
// Every route is a thin translation of a session.Manager call. An API key
// (Authorization: Bearer) names a tenant (package tenant); the caller's
// session names become the tenant's own session keys, so a tenant never
// reaches another's sessions: their names answer 404, exactly like unknown
// ones. With no keys configured every caller is tenant.Local.
//
// # Lifecycle and contexts
//
// NewHandler does no I/O. An execution runs on a context detached from its
// request (it keeps the request's values, not its cancellation): a client
// that disconnects does not interrupt its code, whose result is recorded by
// the Manager and answered by GET .../executions/{id}. Until the code
// starts, though, the request's cancellation counts (session.QueueContext):
// an execution still waiting for its session's turn when its client leaves
// is dropped, never run, so abandoned requests do not pile up. Such executions end
// at their timeout (enforced by the kernel) or with the Manager: close the
// Manager after the HTTP server has shut down, and it waits for them.
//
// The routes are described by the OpenAPI 3 document embedded as
// openapi.yaml and served at /v1/agentbox/openapi.yaml.
package native
