// Package kernel holds the wire protocol between the host and the Python
// kernel inside a sandbox container, and the Go client that speaks it over any
// byte stream (in practice a `docker exec -i` stream to agentbox_bridge.py,
// which hands the stream's two ends to the init over its abstract Unix socket,
// so that the init reads and writes the stream itself).
//
// # Lifecycle
//
// NewClient reads the init's hello and refuses a protocol version other than
// ProtocolVersion (the image is stale: run sandbox-setup). The client is then
// safe for concurrent use until Close. Calls take a context; when an
// Execute's context ends the code is interrupted, and the result is still
// returned once the kernel reports it.
//
// # Wire protocol
//
// One JSON object per line, in each direction. Client requests:
//
//	{"type":"execute","req":"1","id":"call-7","code":"x+1","timeout":30}
//	{"type":"get","req":"2","id":"call-7"}          result of an execution by id (waits if running)
//	{"type":"interrupt","id":"call-7"}              SIGINT to it (or drop it if still queued)
//	{"type":"inspect","req":"3"}                    namespace summary
//	{"type":"ping","req":"4"}
//	{"type":"scan","req":"5","path":"/session/artifacts","max":1000}   files under a folder
//
// Init frames:
//
//	{"type":"hello","protocol":4,"kernel_pid":12,"python":"3.14.8","restarts":0,...,"tools":["files","command","spare"]}
//	{"type":"accepted","req":"1","id":"call-7","duplicate":false}
//	{"type":"started","id":"call-7","execution_count":3}
//	{"type":"stream","id":"call-7","name":"stdout","text":"..."}
//	{"type":"display","id":"call-7","kind":"execute_result","data":{"text/plain":"42"}}
//	{"type":"result","id":"call-7","execution_count":3,"status":"ok","error":null,
//	 "timed_out":false,"interrupted":false,"kernel_restarted":false,"state_lost":false,
//	 "truncated":{},"duration_ms":0.4,"replayed":false}
//	{"type":"state","req":"3","variables":[...],"modules":[...]}
//	{"type":"files","req":"5","files":[{"path":"a/b.csv","size":9,"mtime_ns":...,"kind":"file"}],"more":false}
//	{"type":"error","req":"2","code":"unknown_execution","message":"..."}
//
// Tools (protocol 3): the init forks a helper for the host, named by the
// hello's "tools" (Client.Spawn): "files" (files API calls one after
// another, as the sandbox user; the host keeps it for the next call),
// "command" (one shell command's supervisor) and "spare" (a supervisor
// started ahead of its command, which it takes once the host confirms). Its
// standard input and output travel on the client's stream as frames
// followed by raw bytes, with a credit of ToolWindow bytes each way, so one
// slow reader holds only its own tool:
//
//	{"type":"spawn","req":"t6","tool":"files"}     host: start it
//	{"type":"spawned","req":"t6","pid":41}         init: it runs
//	{"type":"in","req":"t6","n":5}hello            host: 5 bytes of its stdin
//	{"type":"ack","req":"t6","n":5}                either: n bytes taken
//	{"type":"out","req":"t6","n":3}abc             init: its stdout ("err": stderr)
//	{"type":"eof","req":"t6"}                      host: end of its stdin
//	{"type":"end","req":"t6"}                      init: its output ended
//	{"type":"close","req":"t6"}                    host: let it go
//
// Frames of an execution go to every client that asked for it (by execute or
// get) and to no other. They stream as the code runs, except that the frames
// of its first 2 ms wait to leave in one write with the result if it is done
// by then (each write costs the engine's stream a round trip's worth of CPU).
// The init keeps the last results (events included), so an execute with a
// known id, or a get, replays them with "replayed": true instead of running
// the code again.
package kernel
