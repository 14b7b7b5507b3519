package docker

import (
	"context"
	"io"
)

// Test hooks of the host sockets (hostsocket.go).

func (d Driver) SocketRoot() string { return d.sockets }

func SocketDirFor(root, id string) string { return socketDirFor(root, id) }

const SocketName = socketName

func (d Driver) DialHost(ctx context.Context, id string) io.ReadWriteCloser {
	return d.dialHost(ctx, id, nil)
}

// WithSocketRoot is d with its containers' socket folders under root.
func (d Driver) WithSocketRoot(root string) Driver {
	d.sockets = root
	return d
}

// PruneNow prunes d's socket folders now.
func (d Driver) PruneNow() {
	d.pruned = &pruner{}
	d.prune()
}
