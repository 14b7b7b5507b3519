"""agentbox bridge: joins its standard input and output to the init's socket.

The host runs it through `docker exec -i`, which gives every client its own
private byte stream to the kernel without any host-side socket or network: it
works with `--network none` and with a remote engine. It is deliberately tiny
(it runs with -I -S, imports nothing heavy) because its start-up time is paid on
every new connection.
"""

import os
import select
import socket
import sys

# "@name" is an abstract Unix socket: nothing on the filesystem that user code
# could delete, and private to the container's network namespace.
SOCKET = os.environ.get("AGENTBOX_SOCKET", "@agentbox/kernel")
if SOCKET.startswith("@"):
    SOCKET = "\0" + SOCKET[1:]


def main():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(SOCKET)
    except OSError as e:
        sys.stderr.write("agentbox-bridge: connect to the init: %s\n" % e)
        return 3
    sfd = sock.fileno()
    inputs = [0, sfd]
    while True:
        ready, _, _ = select.select(inputs, [], [])
        if sfd in ready:
            data = sock.recv(1 << 20)
            if not data:
                return 0
            view = memoryview(data)
            while view:
                n = os.write(1, view)
                view = view[n:]
        if 0 in ready:
            data = os.read(0, 1 << 20)
            if not data:
                # The client closed its side: let the init see end of input,
                # keep forwarding what it still sends.
                sock.shutdown(socket.SHUT_WR)
                inputs = [sfd]
                continue
            sock.sendall(data)


if __name__ == "__main__":
    sys.exit(main())
