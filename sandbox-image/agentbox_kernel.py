"""agentbox kernel worker: the persistent Python namespace of one sandbox.

The init (agentbox_init.py) starts this process and talks to it over two
private pipes, one JSON object per line: requests come in on the file
descriptor AGENTBOX_CONTROL_FD names, replies go out on the next one.
Its file descriptors 1 and 2 are pipes read by the init, so everything written
to them (print, C extensions, subprocesses) is captured at the descriptor level
without this process doing anything. The worker only runs code, one request at
a time, and reports rich results, errors and its namespace.

Requests (init -> worker):
  {"type": "execute", "id": ..., "code": ..., "count": N, "n": nonce}
  {"type": "inspect", "req": ..., "n": nonce}
Replies (worker -> init):
  {"type": "ready", "pid": N, "python": "3.x.y"}
  {"type": "display", "id": ..., "data": {mime: text}, "kind": "display_data" | "execute_result", "n": nonce}
  {"type": "done", "id": ..., "error": null | {"name", "value", "traceback"}, "n": nonce}
  {"type": "state", "req": ..., "variables": [...], "modules": [...], "n": nonce}

Every reply echoes the nonce of the request it answers. User code runs in
this process and can write to the pipes too; the init takes a frame without
the current (or the last) request's nonce for what it is, a forgery, and
restarts this worker saying state was lost. Code that digs the nonce out of
this process's memory can still forge, but only its own execution's result,
which it could print anyway; the init's deadlines hold whatever it does.

Standard library only: with agentbox_frames.py beside it, it runs in any image
that has python3.
"""

import _thread
import ast
import base64
import io
import linecache
import os
import reprlib
import signal
import sys
import traceback
import types

# The script's folder leads the path (main gives its place to the session
# folder), even when a session's PYTHONSAFEPATH left it out.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path[:1] != [_HERE]:
    sys.path.insert(0, _HERE)
from agentbox_frames import decode, encode  # noqa: E402

try:
    # signal.signal turns both handlers into enum members, at the price of two
    # caught exceptions; the worker sets its SIGINT handler on every execution,
    # so it calls the C function beneath.
    from _signal import signal as _set_handler
except ImportError:
    from signal import signal as _set_handler

KERNEL_FILE = os.path.abspath(__file__)
REPR_LIMIT = 200
MAX_LINECACHE_CELLS = 200

_running_user_code = False
# The kernel's control channel, for the fork handler below.
_channel = None


def _after_fork_in_child():
    """In a child that code forked from the kernel: the control pipes are
    replaced by /dev/null, so the child can neither take the next request
    nor answer for the kernel; if it returns into the kernel's loop it exits
    there (see _leave_if_forked)."""
    if _channel is None:
        return
    _channel.forked = True
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (_channel.rfd, _channel.wfd):
            os.dup2(null, fd, inheritable=False)
        os.close(null)
    except OSError:
        pass


def _leave_if_forked():
    """Called where a forked child would return into the kernel's loop
    (os.fork() in a cell, both processes carry on): the child flushes what
    the code wrote and exits, as at the end of its cell, rather than become
    a second kernel that takes every other request."""
    if _channel is not None and _channel.forked:
        _flush_all()
        os._exit(0)


def _on_sigint(signum, frame):
    # Only user code is interrupted; a late signal that arrives while the
    # worker is between cells (writing a reply) must not break the protocol.
    if _running_user_code:
        raise KeyboardInterrupt


class Channel:
    """Line-delimited JSON over the control pipes."""

    def __init__(self, fd):
        # Not inherited by the code's subprocesses (os.system, say).
        os.set_inheritable(fd, False)
        os.set_inheritable(fd + 1, False)
        self.reader = os.fdopen(fd, "rb")
        self.rfd = fd
        self.wfd = fd + 1
        self.pending = b""  # frames held back by send(..., hold=True)
        # The nonce of the request being answered (kept after it, so that a
        # late display() of a background thread is told from a forgery).
        self.nonce = None
        self.forked = False  # this process is a child of the kernel
        # One frame at a time on the pipe: display() from several threads
        # would interleave frames larger than PIPE_BUF, which the init takes
        # for forgeries (and kills the kernel for).
        self.lock = _thread.allocate_lock()

    def send(self, msg, hold=False):
        """Writes a frame. hold=True keeps it to go out with the next one: the
        init wakes up once for both, not twice."""
        if self.forked:
            return
        msg["n"] = self.nonce
        data = self.pending + encode(msg)
        self.pending = b""
        if hold:
            self.pending = data
            return
        if not _running_user_code:
            # SIGINT raises nothing now (see _on_sigint): the frame goes out whole.
            self._write(data)
            return
        # display() from user code: an interrupt in the middle of the frame
        # would leave half of it on the wire; hold SIGINT until it is out.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._write(data)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _write(self, data):
        with self.lock:
            n = os.write(self.wfd, data)
            if n < len(data):  # a frame larger than the pipe holds
                view = memoryview(data)[n:]
                while view:
                    view = view[os.write(self.wfd, view):]

    def recv(self):
        line = self.reader.readline()
        if not line:
            return None
        msg = decode(line)
        self.nonce = msg.get("n")
        return msg


def _flush_all():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if _libc is not None:
        try:
            _libc.fflush(None)  # C code's stdio buffers (printf from extensions)
        except Exception:
            pass


def _load_libc():
    try:
        import ctypes
        import ctypes.util

        return ctypes.CDLL(None)
    except Exception:
        return None


_libc = None


def mime_bundle(obj):
    """The notebook representation of obj: text/plain always, richer forms
    when the object offers them (pandas offers text/html)."""
    data = {}
    try:
        data["text/plain"] = repr(obj)
    except Exception as e:  # a broken __repr__ must not break the cell
        data["text/plain"] = "<repr failed: %s: %s>" % (type(e).__name__, e)
    for method, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"), ("_repr_svg_", "image/svg+xml"), ("_repr_latex_", "text/latex")):
        fn = getattr(obj, method, None)
        if callable(fn) and not isinstance(obj, type):
            try:
                value = fn()
            except Exception:
                continue
            if isinstance(value, str):
                data[mime] = value
    fn = getattr(obj, "_repr_png_", None)
    if callable(fn) and not isinstance(obj, type):
        try:
            value = fn()
            if isinstance(value, bytes):
                data["image/png"] = base64.b64encode(value).decode("ascii")
        except Exception:
            pass
    return data


class Kernel:
    def __init__(self, channel):
        self.ch = channel
        self.current_id = None
        self.cells = []
        module = types.ModuleType("__main__")
        sys.modules["__main__"] = module
        self.ns = module.__dict__
        self.ns["display"] = self.display
        self.baseline = set(self.ns)

    # -- output ---------------------------------------------------------

    def display(self, *objs, **kwargs):
        """display(obj, ...): show objects as rich output, like a notebook's."""
        _flush_all()
        for obj in objs:
            self.ch.send({"type": "display", "id": self.current_id, "kind": "display_data", "data": mime_bundle(obj)})

    def _send_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            nums = plt.get_fignums()
        except Exception:
            return
        for num in nums:
            try:
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                w, h = fig.get_size_inches() * fig.dpi
                self.ch.send({
                    "type": "display",
                    "id": self.current_id,
                    "kind": "display_data",
                    "data": {
                        "image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                        "text/plain": "<Figure size %dx%d with %d Axes>" % (w, h, len(fig.axes)),
                    },
                })
            except Exception as e:
                sys.stderr.write("agentbox: could not render figure %s: %s\n" % (num, e))
        try:
            plt.close("all")
        except Exception:
            pass

    # -- execution ------------------------------------------------------

    def _remember_source(self, filename, code):
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        self.cells.append(filename)
        if len(self.cells) > MAX_LINECACHE_CELLS:
            linecache.cache.pop(self.cells.pop(0), None)

    def execute(self, msg):
        global _running_user_code
        self.current_id = msg.get("id")
        code = msg.get("code", "")
        filename = "<cell-%d>" % msg.get("count", 0)
        self._remember_source(filename, code)
        error = None
        value = None
        try:
            try:
                tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST)  # ast.parse, less its wrapper
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, filename, "exec")
                tail = compile(last, filename, "eval") if last is not None else None
            except (SyntaxError, ValueError, OverflowError, MemoryError) as e:
                error = self._error(e, syntax=True)
            else:
                _running_user_code = True
                try:
                    exec(body, self.ns)
                    if tail is not None:
                        value = eval(tail, self.ns)
                finally:
                    _running_user_code = False
        except BaseException as e:
            _running_user_code = False
            error = self._error(e)
        _leave_if_forked()
        # The code may have replaced the handler; ours makes a late SIGINT
        # harmless while the worker reports (see Channel.send).
        _set_handler(signal.SIGINT, _on_sigint)
        if value is not None:
            self.ns["_"] = value
            _flush_all()
            # It leaves with the next frame (a figure, or done): the init
            # orders the output written meanwhile (figure warnings) before it.
            self.ch.send({"type": "display", "id": self.current_id, "kind": "execute_result", "data": mime_bundle(value)}, hold=True)
        try:
            self._send_figures()
        except BaseException as e:
            sys.stderr.write("agentbox: figures: %r\n" % (e,))
        _flush_all()
        self.ch.send({"type": "done", "id": self.current_id, "error": error})
        self.current_id = None

    def _error(self, e, syntax=False):
        name = type(e).__name__
        try:
            value = str(e)
        except Exception:
            value = "<str failed>"
        if syntax:
            lines = traceback.format_exception_only(type(e), e)
        else:
            lines = traceback.format_exception(type(e), e, _user_frames(e.__traceback__))
        out = []
        for chunk in lines:
            out.extend(chunk.rstrip("\n").split("\n"))
        return {"name": name, "value": value, "traceback": out}

    # -- introspection --------------------------------------------------

    def inspect(self, msg):
        global _running_user_code
        variables = []
        modules = []
        short = reprlib.Repr()
        short.maxstring = REPR_LIMIT
        short.maxother = REPR_LIMIT
        # Reprs are user code (a __repr__ may loop): the init's deadline
        # interrupts them with SIGINT, and what was listed by then is the
        # answer.
        _running_user_code = True
        try:
            self._list(short, variables, modules)
        except BaseException:
            pass
        finally:
            _running_user_code = False
        _set_handler(signal.SIGINT, _on_sigint)
        _leave_if_forked()
        variables.sort(key=lambda v: v["name"])
        modules.sort(key=lambda m: m["name"])
        self.ch.send({"type": "state", "req": msg.get("req"), "variables": variables, "modules": modules})

    def _list(self, short, variables, modules):
        for name, value in list(self.ns.items()):
            if name.startswith("_") or name in self.baseline:
                continue
            if isinstance(value, types.ModuleType):
                modules.append({"name": name, "module": value.__name__})
                continue
            t = type(value)
            entry = {"name": name, "type": t.__name__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__qualname__)}
            try:
                text = short.repr(value)
            except Exception as e:
                text = "<repr failed: %s>" % type(e).__name__
            if len(text) > REPR_LIMIT:
                text = text[: REPR_LIMIT - 3] + "..."
            entry["repr"] = text
            entry["size"] = _size(value)
            shape = getattr(value, "shape", None)
            if isinstance(shape, tuple):
                entry["shape"] = [int(x) if isinstance(x, int) else str(x) for x in shape]
            elif hasattr(value, "__len__") and not isinstance(value, type):
                try:
                    entry["len"] = len(value)
                except Exception:
                    pass
            variables.append(entry)


def _user_frames(tb):
    """The traceback without the kernel's own frames (the exec call above the
    user's code, the SIGINT handler below it): the user sees their code only."""
    frames = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != KERNEL_FILE:
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _size(value):
    try:
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int):
            return nbytes
        usage = getattr(value, "memory_usage", None)
        if callable(usage) and hasattr(value, "columns"):
            return int(usage(index=True, deep=False).sum())
        return sys.getsizeof(value)
    except Exception:
        return None


def main():
    global _libc, _channel
    signal.signal(signal.SIGINT, _on_sigint)
    # User code imports from the session folder, as a notebook imports from its cwd.
    sys.path[0] = ""
    sys.argv = [""]
    ch = Channel(int(os.environ.pop("AGENTBOX_CONTROL_FD", "3")))
    _channel = ch
    os.register_at_fork(after_in_child=_after_fork_in_child)
    _libc = _load_libc()
    # The folders code is told to use, and those /app and /workspace link
    # to, exist from the start (the init makes them; a TMPFS /session is
    # empty, a BIND one made by the host), and again after code removed
    # them and the kernel restarted.
    for sub in ("artifacts", "data", "app", "workspace"):
        try:
            os.makedirs(os.path.join("/session", sub), exist_ok=True)
        except OSError:
            pass  # not ours to fix: code sees the error when it writes there
    kernel = Kernel(ch)
    ch.send({"type": "ready", "pid": os.getpid(), "python": "%d.%d.%d" % sys.version_info[:3]})
    while True:
        try:
            msg = ch.recv()
        except KeyboardInterrupt:
            continue  # an interrupt that arrived after the cell had finished
        if msg is None:
            return 0
        kind = msg.get("type")
        if kind == "execute":
            kernel.execute(msg)
        elif kind == "inspect":
            kernel.inspect(msg)


if __name__ == "__main__":
    sys.exit(main())
