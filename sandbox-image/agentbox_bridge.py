"""agentbox bridge: hands its standard input and output to the init.

The host runs it through `docker exec -i`, which gives every client its own
private byte stream to the kernel without any host-side socket or network: it
works with `--network none` and with a remote engine. It does not relay the
stream: it passes the two file descriptors to the init over an abstract Unix
socket (SCM_RIGHTS), and the init reads requests from the stream and writes
frames to it itself, sparing each frame a hop through this process. The
bridge then only keeps the exec alive until the init closes the socket (the
client hung up) and exits. It is deliberately tiny (it runs with -I -S, imports
nothing heavy) because its start-up time is paid on every new connection.
"""

import os
import socket
import sys

# "@name" is an abstract Unix socket: nothing on the filesystem that user code
# could delete, and private to the container's network namespace. The init
# takes handed-over streams on "<name>.handoff".
SOCKET = os.environ.get("AGENTBOX_SOCKET", "@agentbox/kernel")
if SOCKET.startswith("@"):
    SOCKET = "\0" + SOCKET[1:]
HANDOFF = SOCKET + ".handoff"


def main():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(HANDOFF)
        socket.send_fds(sock, [b"\0"], [0, 1])
    except OSError as e:
        sys.stderr.write("agentbox-bridge: hand the stream to the init: %s\n" % e)
        return 3
    # Our own copies of the stream must not hold it open once the init lets
    # go of it, nor does anything read or write them here.
    os.close(0)
    os.close(1)
    # The init never writes here: recv returns when it closes the socket (the
    # client hung up, or the init ended).
    try:
        while sock.recv(1):
            pass
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
