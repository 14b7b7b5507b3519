// Package kernel holds the wire protocol between the host and the Python
// kernel inside a sandbox container, and the Go client that speaks it over any
// byte stream (in practice a `docker exec` stream to agentbox_bridge.py).
//
// The protocol is one JSON object per line in each direction. On connect the
// init announces itself with a "hello" frame carrying ProtocolVersion; the
// client refuses any other version and says to rebuild the image with
// sandbox-setup.
package kernel
