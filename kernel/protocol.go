package kernel

// ProtocolVersion is the version of the wire protocol this package speaks. It
// must equal PROTOCOL in sandbox-image/agentbox_init.py; an image that
// announces another version is stale and must be rebuilt with sandbox-setup.
const ProtocolVersion = 1
