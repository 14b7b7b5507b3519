// Package opensandbox serves the lifecycle half of OpenSandbox's API
// (specs/sandbox-lifecycle.yml of opensandbox-group/OpenSandbox) over a
// session.Manager, so that programs written for OpenSandbox's SDKs create,
// inspect, pause, resume, renew and delete agentbox sessions unchanged.
//
// # Mapping
//
// A sandbox is a session. Its id is made by the server (random, URL-safe)
// and its session key is the calling tenant's tenant.SessionKey(id), so a
// tenant reaches only its own sandboxes: another tenant's id answers 404,
// exactly like an unknown one. Create starts the session before it answers
// (202, state Running: there is no Pending phase to poll). A requested image
// runs as the configured sandbox image, or as the allowed named image
// (SANDBOX_IMAGES) it names by name or reference; get reports which. The
// entrypoint cannot be chosen: agentbox runs its own init, which idles
// waiting for work, so only idle entrypoints (the SDK's default tail -f
// /dev/null, sleep infinity) are accepted. Resource limits (cpu, memory) and
// the timeout are checked against the operator's maxima by the Manager and
// refused, never trimmed, above them. A timeout of null means no expiry;
// an absent one, the operator's default (SESSION_TTL_S).
//
// States: running is Running, paused Paused, stopped Terminated, lost
// Failed. Endpoint resolution answers every port with the one execution
// daemon of the server, <host>/execd/<id>, and a per-sandbox access token in
// the header X-EXECD-ACCESS-TOKEN, of the sandbox's current container and
// valid for the Tokens' TTL from the call (the execd routes themselves are
// package server/execd's); the SDK resolves the egress sidecar's port 18080 on every
// create and fails if that does not resolve, so it does.
//
// # Requests
//
// The API key comes in the header OPEN-SANDBOX-API-KEY; with no keys
// configured every request is tenant.Local. X-Request-ID is echoed (made
// when absent or unusable). Every error is OpenSandbox's {"code",
// "message"} with the matching status. Bodies are capped (413 above).
//
// The Handler holds no state of its own: every answer comes from the
// Manager, so several servers over one engine and database agree, and a
// restarted server sees every sandbox again.
package opensandbox
