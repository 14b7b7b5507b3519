"""agentbox tools: the helpers the init runs for the host over a client's
connection (protocol 3), beside executions, so that a shell command costs
a fork in the container, and a files API call not even that, instead of an
engine exec.

Three tools exist, and the host can name no other program:

* "files", calls of the files API one after another (agentbox_fileops.py's
  serve), as the sandbox user with no capabilities: the host keeps a few
  such tools a channel and hands each call to an idle one;
* "command", one shell command under its supervisor
  (agentbox_supervisor.py), as root like the init: the supervisor drops to
  the sandbox user for the command itself;
* "spare", the same, started ahead of its command, so that a command does
  not wait for the fork; it forks the command's process ahead too
  (agentbox_supervisor.prefork), so that the command waits for no fork
  at all, only its exec.

Each is forked from the init and never exec'd. So the files helper, once
it has taken the sandbox user's ids, stays undumpable (it inherits the
init's flag, and a change of ids keeps it at the system's suid_dumpable, 0):
code of the same uid can neither trace it nor open its pipes through
/proc/PID/fd, whereas a program exec'd as that user would be dumpable again.
Its modules are imported once, in the init, so a call pays no start-up.

The wire, on the client's stream (one JSON object per line, some followed
by raw bytes):

    host -> init  {"type": "spawn", "req": R, "tool": "files"}
                  {"type": "in", "req": R, "n": N} + N bytes   the tool's stdin
                  {"type": "eof", "req": R}                    ends its stdin
                  {"type": "ack", "req": R, "n": N}            N output bytes taken
                  {"type": "close", "req": R}                  lets the tool go
    init -> host  {"type": "spawned", "req": R, "pid": P}
                  {"type": "out" | "err", "req": R, "n": N} + N bytes
                  {"type": "ack", "req": R, "n": N}            N stdin bytes written
                  (stderr is outside the window: at most MAX_STDERR a tool)
                  {"type": "end", "req": R}                    its output ended

Flow control is per tool, both ways, by credit: the init sends at most
WINDOW bytes of a tool's output the host has not acknowledged, and the host
sends at most WINDOW bytes of input the init has not acknowledged. So a
slow reader of one tool holds only that tool, never the stream, and neither
side buffers more than a window per tool.

"close", and a client that goes away, close the init's ends of the tool's
pipes: the tool sees the end of its input and a broken output, as a
process of an engine exec does when its stream closes (the supervisor then
kills its command). Nothing is killed by the init itself.

Standard library only.
"""

import fcntl
import os
import selectors
import signal
import sys

WINDOW = 4 << 20  # credit per tool and direction, bytes
CHUNK = 256 << 10  # the largest payload of one "in", "out" or "err" frame
PIPE_SIZE = 1 << 20
MAX_STDERR = 64 << 10  # of a tool's standard error, what reaches the host
F_SETPIPE_SZ = 1031
PR_SET_NAME = 15
TOOLS = ("files", "command", "spare")
# What a tool's process is called (its comm): agentbox_probes.py counts the
# root processes named agentbox-cmd as running commands.
# "spare" is the command supervisor started ahead of its command (the host
# keeps one a channel): agentbox-spare until it has its command, then it
# names itself agentbox-cmd. A "command" is one from its start, so that a
# sweep that looks while its spec is on the way counts it.
NAMES = {"files": b"agentbox-files", "command": b"agentbox-cmd", "spare": b"agentbox-spare"}


def grow_pipe(fd):
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass  # the default (64 KiB) works, a little slower


class Tool:
    """One tool process and the host's view of it on one client."""

    def __init__(self, init, client, req, pid, w_in, r_out, r_err):
        self.init = init
        self.client = client
        self.req = req
        self.pid = pid
        self.w_in, self.r_out, self.r_err = w_in, r_out, r_err
        self.inbuf = bytearray()
        self.in_eof = False  # the host ended the tool's input
        self.unacked = 0  # output bytes sent to the host and not acknowledged
        self.stderr_sent = 0
        self.reading = set()  # output fds registered for reading
        self.writing = False
        self.ended = False
        self.resume_reading()

    # -- output: tool -> host ---------------------------------------------

    def resume_reading(self):
        for fd in (self.r_out, self.r_err):
            if fd == self.r_out and self.unacked >= WINDOW:
                continue
            if fd is not None and fd not in self.reading:
                self.init.sel.register(fd, selectors.EVENT_READ, self)
                self.reading.add(fd)

    def pause_reading(self, fds=None):
        for fd in list(self.reading if fds is None else fds):
            if fd in self.reading:
                self.init.sel.unregister(fd)
                self.reading.discard(fd)

    def on_event(self, fd, mask):
        if fd == self.w_in:
            self.flush_in()
            return
        if fd not in self.reading:
            return
        room = WINDOW - self.unacked if fd == self.r_out else CHUNK
        if room <= 0:
            self.pause_reading([fd])
            return
        try:
            data = os.read(fd, min(CHUNK, room))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.init.sel.unregister(fd)
            self.reading.discard(fd)
            os.close(fd)
            if fd == self.r_out:
                self.r_out = None
            else:
                self.r_err = None
            self.maybe_end()
            return
        if fd == self.r_err:
            # Not under the window (the host's reader keeps it for
            # messages and acknowledges nothing), so bounded here.
            data = data[: max(0, MAX_STDERR - self.stderr_sent)]
            self.stderr_sent += len(data)
            if data:
                self.client.send_data({"type": "err", "req": self.req, "n": len(data)}, data)
            return
        self.client.send_data({"type": "out", "req": self.req, "n": len(data)}, data)
        self.unacked += len(data)
        if self.unacked >= WINDOW:
            self.pause_reading([self.r_out])

    def acked(self, n):
        self.unacked = max(0, self.unacked - n)
        if not self.ended:
            self.resume_reading()

    def maybe_end(self):
        if self.r_out is None and self.r_err is None and not self.ended:
            self.ended = True
            self.client.send({"type": "end", "req": self.req})
            if self.w_in is None:
                self.client.tools.pop(self.req, None)

    # -- input: host -> tool ----------------------------------------------

    def feed(self, data):
        """Takes input the host sent; False when the host broke the window."""
        if self.w_in is None or self.in_eof:
            # The tool's input is closed: taken and dropped, but
            # acknowledged, so the host's writer never waits for room that
            # cannot come.
            self.client.send({"type": "ack", "req": self.req, "n": len(data)})
            return True
        self.inbuf += data
        if len(self.inbuf) > WINDOW + CHUNK:
            return False
        self.flush_in()
        return True

    def end_input(self):
        self.in_eof = True
        if not self.inbuf:
            self.close_in()

    def flush_in(self):
        written = 0
        while self.inbuf and self.w_in is not None:
            try:
                n = os.write(self.w_in, self.inbuf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # The tool is gone or closed its input: what is left is
                # acknowledged and dropped.
                written += len(self.inbuf)
                self.inbuf.clear()
                self.close_in()
                break
            del self.inbuf[:n]
            written += n
        if written:
            self.client.send({"type": "ack", "req": self.req, "n": written})
        want = bool(self.inbuf) and self.w_in is not None
        if want != self.writing:
            self.writing = want
            if want:
                self.init.sel.register(self.w_in, selectors.EVENT_WRITE, self)
            else:
                self.init.sel.unregister(self.w_in)
        if not self.inbuf and self.in_eof:
            self.close_in()

    def close_in(self):
        if self.w_in is None:
            return
        if self.writing:
            self.init.sel.unregister(self.w_in)
            self.writing = False
        os.close(self.w_in)
        self.w_in = None
        self.inbuf.clear()
        if self.ended:
            self.client.tools.pop(self.req, None)

    def close(self):
        """Lets the tool go: the init's ends of its pipes close."""
        self.pause_reading()
        for name in ("r_out", "r_err"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)
        self.ended = True
        self.close_in()
        self.client.tools.pop(self.req, None)


def preload():
    """Imports the tools' programs into the init, once, at its first
    tool, so that every forked tool starts with them loaded; not at the
    init's start, which a new session waits for (each import is a walk of
    the image's file system, slow on a loaded host)."""
    import agentbox_fileops  # noqa: F401
    import agentbox_supervisor  # noqa: F401


def spawn(init, client, req, tool):
    """Forks tool for client; returns the Tool, or raises OSError."""
    pipes = [os.pipe() for _ in range(3)]
    (r_in, w_in), (r_out, w_out), (r_err, w_err) = pipes
    for fd in (w_in, r_out):
        grow_pipe(fd)
    try:
        pid = os.fork()
    except OSError:
        for pair in pipes:
            for fd in pair:
                os.close(fd)
        raise
    if pid == 0:
        code = 127
        try:
            os.dup2(r_in, 0)
            os.dup2(w_out, 1)
            os.dup2(w_err, 2)
            # Nothing of the init's: its clients' streams, its listeners,
            # the worker's pipes.
            os.closerange(3, 65536)
            code = run(init, tool)
        except BaseException as e:
            try:
                os.write(2, ("agentbox tool %s: %r\n" % (tool, e)).encode("utf-8", "replace"))
            except OSError:
                pass
        finally:
            os._exit(code)
    for fd in (r_in, w_out, w_err):
        os.close(fd)
    for fd in (w_in, r_out, r_err):
        os.set_blocking(fd, False)
    return Tool(init, client, req, pid, w_in, r_out, r_err)


def run(init, tool):
    """In the forked child: becomes the tool and runs it; its exit code."""
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    set_name(NAMES[tool])
    sys.stdin = sys.stdout = sys.stderr = None  # the init's objects: never these fds' owners
    if tool == "files":
        init.drop_to_sandbox_user()
        import agentbox_fileops

        # Calls, one after another, until the host lets the tool go: the
        # host keeps a few such tools a channel, so a call costs no fork.
        agentbox_fileops.serve()
        return 0
    import agentbox_supervisor

    agentbox_supervisor.main(ahead=tool == "spare")
    return 0


def set_name(name):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    except (OSError, AttributeError):
        pass
