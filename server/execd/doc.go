// Package execd serves the per-sandbox execution daemon ("execd") API of
// OpenSandbox over a session.Manager, so that programs written for
// OpenSandbox's SDKs run their commands, files and code against agentbox
// unchanged.
//
// # Addressing and access
//
// NewHandler answers /execd/{id}/<route> (the prefix is Options.Prefix):
// the lifecycle API hands clients the endpoint <host>/execd/{id} with the
// header X-EXECD-ACCESS-TOKEN set to Tokens.Issue(tenant, id, container
// id), and the SDK calls <endpoint>/<route>. Every request must carry that
// token: it names the tenant, and the session key is tenant.SessionKey(id),
// so a tenant reaches only its own sandboxes and the token of sandbox A
// opens nothing on B. A missing token is 401, a wrong one 403; an expired
// one (TOKEN_EXPIRED), one whose tenant is no longer among Options.Keys
// (KEY_REVOKED) and one issued for an earlier container of the sandbox
// (SANDBOX_RECREATED) are 401, each refusal with Connection: close. The
// sandbox must exist and not be stopped (404 otherwise): the handler never
// creates a session, it asks Manager.Info before any call that would.
//
// # Streams
//
// POST /command and POST /code answer with a stream of JSON events, one per
// "\n\n"-terminated block (no "data:" prefix, as OpenSandbox's execd writes
// them; the SDK accepts both), each with a timestamp in Unix milliseconds,
// flushed as it is produced, with a ping event every PingInterval while the
// work runs. stdout and stderr events carry one line each: for commands the
// line without its terminator (as OpenSandbox's execd), for Python code the
// line with its newline (as Jupyter streams it). A command that exits
// non-zero ends with an error event (ename CommandExecError, evalue the
// exit code) and no execution_complete; so does Python code that raises.
//
// # Code contexts
//
// A sandbox has one persistent Python kernel (the session's). Every Python
// context of a sandbox is a name for that one kernel: variables defined
// through one context are visible through the others, and they persist
// across /code calls, which is what a code-interpreter context promises.
// Contexts are kept in this handler's memory (a server restart forgets the
// list, not the kernel's state: code run with an unknown context id still
// runs, and re-registers the id). Deleting a context forgets its id and
// never resets the kernel, since other contexts share it. Interrupting a
// context (DELETE /code?id=) interrupts its running code with
// KeyboardInterrupt; state defined before stays. Only Python is offered.
//
// # Commands
//
// Foreground commands run beside the kernel (Manager.Run) and are killed
// when the client goes away; their status stays queryable here for a
// while. Background commands (Manager.StartCommand) keep running; their
// logs are read by byte cursor (EXECD-COMMANDS-TAIL-CURSOR), as
// OpenSandbox's execd does. Commands run as the sandbox user: uid and gid
// are refused.
package execd
