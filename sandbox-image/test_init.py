"""Tests of the init against the golden transcripts in kernel/testdata, of
the stream handover that agentbox_bridge.py makes, and of the framing.

The same transcripts drive the Go client's tests (kernel/golden_test.go), so
the two sides of the protocol cannot drift apart. Run inside the sandbox image
(sandbox-image/init_test.go does) or anywhere with python3:

    python3 test_init.py ../kernel/testdata
"""

import glob
import json
import os
import socket
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agentbox_frames  # noqa: E402
GOLDEN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "kernel", "testdata")
TERMINAL = ("result", "error", "state")


def load(path):
    hello, steps = None, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, obj = line[0], json.loads(line[2:])
            if kind == "<":
                if hello is None:
                    hello = obj
                else:
                    steps[-1]["frames"].append(obj)
            elif kind == ">":
                steps.append({"request": obj, "frames": []})
    return hello, steps


def merge_streams(frames):
    out = []
    for f in frames:
        if f["type"] == "stream" and out and out[-1]["type"] == "stream" and out[-1]["name"] == f["name"]:
            out[-1] = dict(out[-1], text=out[-1]["text"] + f["text"])
        else:
            out.append(dict(f))
    return out


def matches(want, got, req):
    if want == "$any":
        return True
    if want == "$req":
        return got == req
    if isinstance(want, dict):
        return isinstance(got, dict) and all(matches(v, got.get(k), req) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(matches(w, g, req) for w, g in zip(want, got))
    return want == got


class Init:
    def __init__(self, name):
        self.name = name
        env = dict(os.environ, AGENTBOX_SOCKET="@" + name)
        self.proc = subprocess.Popen([sys.executable, "-u", os.path.join(HERE, "agentbox_init.py")], env=env, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect("\0" + name)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.file = self.sock.makefile("rwb")

    def recv(self):
        line = self.file.readline()
        if not line:
            raise EOFError("the init closed the connection")
        return json.loads(line)

    def send(self, msg):
        self.file.write((json.dumps(msg) + "\n").encode())
        self.file.flush()

    def recv_frame(self):
        """A frame and the raw bytes after it (a tool's "out" or "err")."""
        msg = self.recv()
        data = b""
        if msg.get("type") in ("out", "err"):
            data = self.file.read(msg["n"])
            if len(data) != msg["n"]:
                raise EOFError("the init closed the connection in a frame's payload")
        return msg, data

    def send_data(self, msg, data):
        """A frame carrying raw bytes (a tool's "in")."""
        self.file.write((json.dumps(dict(msg, n=len(data))) + "\n").encode() + data)
        self.file.flush()

    def close(self):
        self.sock.close()
        self.proc.terminate()
        self.proc.wait(10)


class GoldenTest(unittest.TestCase):
    def replay(self, path):
        hello, steps = load(path)
        init = Init("golden-%d-%s" % (os.getpid(), os.path.basename(path)))
        try:
            got = init.recv()
            self.assertTrue(matches(hello, got, None), "hello %r, want %r" % (got, hello))
            for i, step in enumerate(steps):
                req = "r%d" % i
                init.send(dict(step["request"], req=req))
                frames = []
                while not frames or frames[-1]["type"] not in TERMINAL:
                    frames.append(init.recv())
                want, got = merge_streams(step["frames"]), merge_streams(frames)
                self.assertEqual(len(want), len(got), "%s step %d: frames\n got %r\nwant %r" % (path, i, got, want))
                for w, g in zip(want, got):
                    self.assertTrue(matches(w, g, req), "%s step %d:\n got %r\nwant %r" % (path, i, g, w))
        finally:
            init.close()


class HandoffTest(unittest.TestCase):
    """The bridge's way in: it passes its standard input and output to the
    init, which then speaks the protocol over them directly."""

    def handoff(self, init):
        c2i_r, c2i_w = os.pipe()  # client -> init: the bridge's standard input
        i2c_r, i2c_w = os.pipe()  # init -> client: its standard output
        bridge = socket.socket(socket.AF_UNIX)
        bridge.connect("\0" + init.name + ".handoff")
        socket.send_fds(bridge, [b"\0"], [c2i_r, i2c_w])
        os.close(c2i_r)
        os.close(i2c_w)
        return bridge, os.fdopen(c2i_w, "wb", buffering=0), os.fdopen(i2c_r, "rb")

    def test_protocol_over_handed_over_stream(self):
        init = Init("handoff-%d" % os.getpid())
        try:
            init.recv()
            bridge, w, r = self.handoff(init)
            self.assertEqual(json.loads(r.readline())["type"], "hello")
            w.write(b'{"type":"execute","req":"1","id":"h1","code":"print(6*7)"}\n')
            frames = [json.loads(r.readline())]
            while frames[-1]["type"] != "result":
                frames.append(json.loads(r.readline()))
            frames = merge_streams(frames)
            self.assertEqual([f["type"] for f in frames], ["accepted", "started", "stream", "result"], frames)
            self.assertEqual(frames[2]["text"], "42\n")
            # The socket client shares the kernel, never the replies.
            init.send({"type": "ping", "req": "p"})
            self.assertEqual(init.recv(), {"type": "pong", "req": "p"})
            # The client hangs up: the init lets the stream and the bridge go.
            w.close()
            self.assertEqual(r.read(), b"")
            bridge.settimeout(10)
            self.assertEqual(bridge.recv(1), b"")
        finally:
            init.close()

    def test_bridge_gone(self):
        init = Init("handoff-gone-%d" % os.getpid())
        try:
            init.recv()
            bridge, w, r = self.handoff(init)
            self.assertEqual(json.loads(r.readline())["type"], "hello")
            # The exec was killed: the init closes its ends of the stream.
            bridge.close()
            self.assertEqual(r.read(), b"")
            init.send({"type": "ping", "req": "p"})
            self.assertEqual(init.recv(), {"type": "pong", "req": "p"})
        finally:
            init.close()

    def test_handoff_without_descriptors(self):
        init = Init("handoff-bad-%d" % os.getpid())
        try:
            init.recv()
            s = socket.socket(socket.AF_UNIX)
            s.connect("\0" + init.name + ".handoff")
            s.sendall(b"hello?")
            s.settimeout(10)
            self.assertEqual(s.recv(1), b"")
            init.send({"type": "ping", "req": "p"})
            self.assertEqual(init.recv(), {"type": "pong", "req": "p"})
        finally:
            init.close()


class ToolWindowTest(unittest.TestCase):
    """The init's side of a tool's flow control (agentbox_tools.py), on the
    wire: it sends at most WINDOW bytes of a tool's output the host has not
    acknowledged, and more after each ack; and it refuses input beyond
    WINDOW + CHUNK bytes not yet written to the tool. The Go client keeps its
    own side (kernel/tool.go), so its tests never push the init this far."""

    def setUp(self):
        import agentbox_tools
        self.WINDOW, self.CHUNK = agentbox_tools.WINDOW, agentbox_tools.CHUNK
        self.init = Init("tools-%d-%s" % (os.getpid(), self._testMethodName))
        self.addCleanup(self.init.close)
        # A deadline for each read, never a pause: an init that stalls
        # fails the test instead of hanging it.
        self.init.sock.settimeout(5)
        self.assertEqual(self.init.recv()["type"], "hello")

    def spawn(self, req):
        self.init.send({"type": "spawn", "req": req, "tool": "command"})
        msg = self.init.recv()
        self.assertEqual((msg["type"], msg.get("req")), ("spawned", req), msg)
        return msg["pid"]

    def until_pong(self, ping, each):
        """Pings and hands each frame before the pong to each: the init
        answers in order, so that is all it sent for what came before."""
        self.init.send({"type": "ping", "req": ping})
        while True:
            msg, data = self.init.recv_frame()
            if msg == {"type": "pong", "req": ping}:
                return
            each(msg, data)

    def test_output_waits_for_the_hosts_acks(self):
        W, C, init = self.WINDOW, self.CHUNK, self.init
        pid = self.spawn("t")
        spec = json.dumps({"line": "exec cat /dev/zero", "cwd": "/"}).encode()
        init.send_data({"type": "in", "req": "t"}, len(spec).to_bytes(4, "big") + spec)
        sent = acked = 0  # bytes of "out" payload the init sent; bytes the test acknowledged
        first = []

        def out(msg, data):
            nonlocal sent
            if msg == {"type": "ack", "req": "t", "n": msg.get("n")}:
                return  # the command's spec, written
            self.assertEqual((msg["type"], msg.get("req")), ("out", "t"), "the flood stopped: %r %r" % (msg, data[:200]))
            if not first:
                first.append(data[:1])
            sent += len(data)
            self.assertLessEqual(sent - acked, W, "the init sent %d bytes of output ahead of the host's acks (window %d)" % (sent - acked, W))

        def fill():
            while sent - acked < W:
                out(*init.recv_frame())

        fill()  # a window's worth, none acknowledged: then nothing
        self.until_pong("q", out)
        self.assertEqual(first[0], b"o", "not the supervisor's stdout frames")
        # Each ack lets exactly that much more through: odd amounts, less
        # than a chunk and more, so a read of a whole chunk past the
        # window's room shows.
        for i, n in enumerate((1, 1000, C + 4321, W // 2 + 7, W)):
            acked += n
            init.send({"type": "ack", "req": "t", "n": n})
            fill()
            self.until_pong("q%d" % i, out)
        self.assertEqual(sent, acked + W)
        self.assertGreater(sent, 2 * W)
        # Let go, the tool ends: its command is killed, not left writing.
        init.send({"type": "close", "req": "t"})
        self.until_pong("closed", out)
        self.wait_for(lambda: self.state(pid) in (None, "Z"), "the tool to end")

    def test_input_beyond_the_window_is_refused(self):
        import signal

        W, C, init = self.WINDOW, self.CHUNK, self.init
        pid = self.spawn("t")
        # A tool that reads nothing of its input: stopped before any came.
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(self.cont, pid)
        self.wait_for(lambda: self.state(pid) == "T", "the tool to stop")
        sent = written = 0  # input the test sent; what the init acknowledged (the tool's pipe, full)

        def taken(msg, data):
            nonlocal written
            self.assertEqual(msg, {"type": "ack", "req": "t", "n": msg.get("n")}, "input within the window refused")
            written += msg["n"]

        def send(n):
            nonlocal sent
            sent += n
            while n > 0:
                init.send_data({"type": "in", "req": "t"}, bytes(min(n, C)))
                n -= min(n, C)

        # A window ahead of the init's acks, which a host may always send.
        send(W)
        self.until_pong("a", taken)
        self.assertGreater(written, 0, "nothing reached the tool's pipe")
        self.assertLess(written, W, "the stopped tool took %d bytes" % written)
        # Up to WINDOW + CHUNK waiting to be written: still taken.
        while sent - written < W + C:
            send(W + C - (sent - written))
            self.until_pong("b", taken)
        self.assertEqual(sent - written, W + C)
        # One byte more: refused, and the tool let go.
        send(1)
        frames = []
        self.until_pong("c", lambda msg, data: frames.append(msg))
        self.assertEqual(frames, [{"type": "error", "req": "t", "code": "bad_request", "message": "input beyond the tool's window"}])
        # The init holds the name no more: a new tool can take it.
        again = self.spawn("t")
        self.assertNotEqual(again, pid)
        init.send({"type": "close", "req": "t"})
        self.until_pong("d", lambda msg, data: self.fail("after close: %r" % msg))
        self.cont(pid)
        for p in (pid, again):
            self.wait_for(lambda: self.state(p) in (None, "Z"), "tool %d to end" % p)

    def wait_for(self, cond, what):
        deadline = time.monotonic() + 5
        while not cond():
            self.assertLess(time.monotonic(), deadline, "waited 5 s for %s" % what)
            time.sleep(0.001)

    @staticmethod
    def state(pid):
        """A process's state letter, None once it is gone (reaped)."""
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # reaped before, or while, it was read
            return None

    @staticmethod
    def cont(pid):
        import signal
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


class FramesTest(unittest.TestCase):
    def test_round_trip(self):
        msg = {"type": "stream", "text": "é\n\"\t\u2028", "n": [1, 2.5, None, True, False], "d": {}}
        data = agentbox_frames.encode(msg)
        self.assertTrue(data.endswith(b"\n") and data.count(b"\n") == 1)
        self.assertEqual(agentbox_frames.decode(data), msg)
        self.assertEqual(json.loads(data), msg)

    def test_big_stream_frames_match_json(self):
        # Large stream frames take a bytes.replace path; they must be the
        # very bytes json gives (the Go client's fast path relies on it).
        texts = ["x" * 9000, 'a\\b"c\n\r\t é 🔑 \u2028' * 1000, "\x01" + "y" * 9000, "z" * 9000 + "\ud800", "\x1f" * 9000]
        for text in texts:
            msg = {"type": "stream", "id": 'i"d', "name": "stdout", "text": text}
            want = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace") + b"\n"
            self.assertEqual(agentbox_frames.encode(msg), want, text[:20])

    def test_lone_surrogate_is_replaced(self):
        self.assertEqual(agentbox_frames.encode({"t": "a\ud800"}), '{"t":"a?"}\n'.encode())

    def test_decode_is_as_strict_as_json_loads(self):
        self.assertEqual(agentbox_frames.decode(b' {"a": 1}\r\n'), {"a": 1})
        for bad in (b"", b"{", b'{"a":1} {"b":2}', b'{"a":1} x', b"\xff{}", b"nope"):
            with self.assertRaises(ValueError, msg=bad):
                agentbox_frames.decode(bad)


class WorkerEnvTest(unittest.TestCase):
    """The session's variables reach the worker by their own names, and
    agentbox's own settings do not."""

    def test_worker_env(self):
        import agentbox_init as ai
        env = ai.worker_env({
            "PATH": "/usr/bin", "AGENTBOX_USER": "1000:1000", "AGENTBOX_MAX_OUTPUT": "9",
            "AGENTBOX_ENV_PYTHONPATH": "/app", "AGENTBOX_ENV_MY_VAR": "a=b",
            "AGENTBOX_ENV_AGENTBOX_CONTROL_FD": "7", "AGENTBOX_ENV_": "x",
        }, 3)
        self.assertEqual(env, {"PATH": "/usr/bin", "PYTHONPATH": "/app", "MY_VAR": "a=b", "AGENTBOX_CONTROL_FD": "3"})


class WatchdogTest(unittest.TestCase):
    """The memory watchdog's choice of a victim, with the system calls
    replaced: which signals it sends, and to whom."""

    def setUp(self):
        import signal
        import agentbox_init as ai
        self.ai, self.signal = ai, signal
        self.sent = []
        self.ooms = 0
        self.procs = [(200 << 20, 4242, "python3"), (40 << 20, 100, "python3")]
        patches = {
            (ai.os, "killpg"): lambda pid, sig: self.sent.append(("group", pid, sig)),
            (ai.os, "kill"): lambda pid, sig: self.sent.append(("one", pid, sig)),
            (ai, "oom_kills"): lambda: self.ooms,
            (ai, "started_processes"): lambda: list(self.procs),
        }
        for (obj, name), fake in patches.items():
            self.addCleanup(setattr, obj, name, getattr(obj, name))
            setattr(obj, name, fake)
        init = ai.Init.__new__(ai.Init)
        init.memory = ai.MemoryWatch(0)
        init.memory.limit = init.memory.ceiling = init.memory.hard = 256 << 20
        init.memory.ooms = 0
        init.worker = type("W", (), {"pid": 100, "memory_kill": None})()
        init.current = None
        self.init = init

    def killed(self):
        return [(kind, pid) for kind, pid, sig in self.sent if sig == self.signal.SIGKILL]

    def test_kills_the_largest_process(self):
        self.init.kill_for_memory(245 << 20, 10.0)
        self.assertEqual(self.killed(), [("one", 4242)])
        self.assertIsNone(self.init.worker.memory_kill)

    def test_waits_after_the_kernels_own_kill(self):
        # Under runc the kernel's killer is right behind the ceiling: the
        # process it just ended may still be counted (and even listed) for
        # a moment. Taking another one, the kernel, for its memory would
        # lose every variable for nothing.
        self.ooms = 1
        self.procs = [(40 << 20, 100, "python3")]
        self.init.kill_for_memory(245 << 20, 10.0)
        self.assertEqual(self.killed(), [])
        self.assertIsNone(self.init.worker.memory_kill)
        self.assertIsNotNone(self.init.memory.victim)
        self.assertIn(("group", 100, self.signal.SIGCONT), self.sent)
        self.assertTrue(self.init.memory.settle(245 << 20, 10.1))


class WorkerFramesTest(unittest.TestCase):
    """What the init makes of frames on the worker's reply pipe, which user
    code can write to: only the kernel's answers, carrying the nonce of the
    request at hand, count; anything else kills the worker (never PID 1)."""

    def setUp(self):
        import signal
        import agentbox_init as ai
        self.ai, self.signal = ai, signal
        self.sent = []
        self.addCleanup(setattr, ai.os, "killpg", ai.os.killpg)
        ai.os.killpg = lambda pid, sig: self.sent.append((pid, sig))
        init = ai.Init.__new__(ai.Init)
        init.memory = ai.MemoryWatch(0)
        init.worker = ai.Worker.__new__(ai.Worker)
        w = init.worker
        w.pid, w.ready, w.killed_for, w.nonce, w.last_nonce = 100, True, None, "n1", "n0"
        ex = ai.Execution("e1", "pass", None, None)
        ex.started, ex.captures = 0.0, {}
        init.current = ex
        init.drain_output = lambda: None
        self.init, self.ex = init, ex

    def killed(self):
        return (100, self.signal.SIGKILL) in self.sent

    def test_frames_without_the_nonce_kill_the_worker(self):
        for frame in ({"type": "done", "error": None}, {"type": "done", "error": None, "n": "guess"},
                      {"type": "ready", "pid": 1}, {"type": "done", "error": None, "n": "n0"}):
            self.setUp()
            self.init.on_worker(frame)
            self.assertTrue(self.killed(), frame)
            self.assertIsNone(self.ex.result, frame)
            self.assertIn("forged", self.init.worker.killed_for)

    def test_late_display_of_the_last_request_is_dropped(self):
        self.init.on_worker({"type": "display", "kind": "display_data", "data": {"text/plain": "late"}, "n": "n0"})
        self.assertFalse(self.killed())
        self.assertEqual(self.ex.events, [])

    def test_malformed_frames_kill_the_worker(self):
        for frame in ({"type": "display", "data": [1], "n": "n1"}, {"type": "display", "data": {"a": 1}, "n": "n1"},
                      {"type": "done", "error": "boom", "n": "n1"}, {"type": "done", "error": {"name": 1}, "n": "n1"}):
            self.setUp()
            self.init.on_worker(frame)
            self.assertTrue(self.killed(), frame)
            self.assertIsNone(self.ex.result, frame)

    def test_the_kernels_answer_counts(self):
        self.init.on_worker({"type": "display", "kind": "display_data", "data": {"text/plain": "1"}, "n": "n1"})
        self.assertFalse(self.killed())
        self.assertEqual(self.ex.events[-1]["data"], {"text/plain": "1"})


class ListFilesTest(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, "artifacts")
        os.makedirs(os.path.join(self.root, "a", "b"))
        for name in ("top.txt", "a/mid.txt", "a/b/deep.txt"):
            with open(os.path.join(self.root, name), "w") as f:
                f.write(name)
        os.symlink("/etc/passwd", os.path.join(self.root, "link"))
        os.symlink("/etc", os.path.join(self.root, "a", "dirlink"))
        os.mkfifo(os.path.join(self.root, "fifo"))
        import agentbox_init
        self.list_files = agentbox_init.list_files

    def test_lists_every_depth_links_as_links(self):
        files, more = self.list_files(self.root, 100)
        kinds = {f["path"]: f["kind"] for f in files}
        self.assertEqual(kinds, {"top.txt": "file", "a/mid.txt": "file", "a/b/deep.txt": "file",
                                 "link": "link", "a/dirlink": "link", "fifo": "other"})
        self.assertFalse(more)
        sizes = {f["path"]: f["size"] for f in files}
        self.assertEqual(sizes["a/b/deep.txt"], len("a/b/deep.txt"))

    def test_limit(self):
        files, more = self.list_files(self.root, 2)
        self.assertEqual(len(files), 2)
        self.assertTrue(more)

    def test_root_that_is_a_link_is_not_followed(self):
        link = os.path.join(self.tmp.name, "elsewhere")
        os.symlink(self.root, link)
        files, more = self.list_files(link, 100)
        self.assertEqual([(f["path"], f["kind"]) for f in files], [(".", "link")])

    def test_missing_root(self):
        self.assertEqual(self.list_files(os.path.join(self.tmp.name, "nope"), 100), ([], False))


class FilesServeTest(unittest.TestCase):
    """agentbox_fileops.serve: the files tool the host keeps, calls one
    after another on one pair of pipes."""

    def setUp(self):
        import tempfile
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.p = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", "-c",
             "import sys; sys.path.insert(0, %r); import agentbox_fileops; agentbox_fileops.serve()" % HERE],
            cwd=HERE, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(self.p.kill)

    def call(self, op, req, confirm):
        body = json.dumps([op, json.dumps(req), confirm]).encode()
        self.p.stdin.write(len(body).to_bytes(4, "big") + body)
        self.p.stdin.flush()

    def line(self):
        return json.loads(self.p.stdout.readline())

    def test_calls_in_a_row(self):
        path = os.path.join(self.tmp.name, "f.txt")
        self.call("write", {}, True)
        self.assertEqual(self.line(), {"ready": True})
        self.p.stdin.write(b"g" + json.dumps({"path": path, "mode": 0o640}).encode() + b"\n")
        self.p.stdin.write((5).to_bytes(4, "big") + b"hello" + (0).to_bytes(4, "big"))
        self.p.stdin.write(b'{"end": true}\n')
        self.p.stdin.flush()
        self.assertEqual(self.line()["size"], 5)
        self.assertEqual(self.line(), {"done": True})
        self.assertEqual(self.line(), {"idle": True})
        self.call("read", {"path": path, "offset": 1, "length": -1, "max": 1 << 20}, False)
        self.assertEqual(self.line()["info"]["length"], 4)
        self.assertEqual(self.p.stdout.read(4), b"ello")
        self.assertEqual(self.line(), {"idle": True})
        self.call("stat", {"path": os.path.join(self.tmp.name, "nope")}, False)
        self.assertEqual(self.line()["error"]["kind"], "not_found")
        self.assertEqual(self.line(), {"idle": True})
        self.p.stdin.close()
        self.assertEqual(self.p.wait(10), 0)

    def write_body(self, path, data, commit=False):
        b = json.dumps({"path": path, "mode": 0o640}).encode() + b"\n"
        b += len(data).to_bytes(4, "big") + data + (0).to_bytes(4, "big")
        if commit:
            b += b'{"commit": true, "whole": true}\n'
        return b + b'{"end": true}\n'

    def test_call_inside_its_window_runs_at_once(self):
        path = os.path.join(self.tmp.name, "now")
        body = self.write_body(path, b"hello")
        now = time.time()
        self.call("write", {}, {"sent": now, "not_after": now + 5, "body": len(body)})
        self.p.stdin.write(body)
        self.p.stdin.flush()
        self.assertEqual(self.line()["size"], 5)
        self.assertEqual(self.line(), {"done": True})
        self.assertEqual(self.line(), {"idle": True})
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"hello")

    def test_call_outside_its_window_never_runs(self):
        # Read after its window (a container frozen past it), or sent by a
        # clock far ahead of the container's: dropped, body and all, and
        # the tool takes the next call.
        for name, sent, not_after in [("late", -10, -9), ("ahead", 10, 11)]:
            path = os.path.join(self.tmp.name, name)
            body = self.write_body(path, b"stale")
            now = time.time()
            self.call("write", {}, {"sent": now + sent, "not_after": now + not_after, "body": len(body)})
            self.p.stdin.write(body)
            self.p.stdin.flush()
            self.assertEqual(self.p.stdout.readline(), b"#stale\n")
            self.assertEqual(self.line(), {"idle": True})
            self.assertFalse(os.path.exists(path))
        self.call("stat", {"path": self.tmp.name}, False)
        self.assertEqual(self.line()["info"]["type"], "dir")

    def test_whole_commit_after_a_failed_file_puts_nothing_in_place(self):
        good = os.path.join(self.tmp.name, "good")
        bad = os.path.join(self.tmp.name, "missing-folder-is-a-file")
        with open(bad, "w"):
            pass
        body = json.dumps({"path": good, "mode": 0o644}).encode() + b"\n"
        body += (2).to_bytes(4, "big") + b"ok" + (0).to_bytes(4, "big")
        body += json.dumps({"path": bad + "/under", "mode": 0o644}).encode() + b"\n"
        body += (2).to_bytes(4, "big") + b"no" + (0).to_bytes(4, "big")
        body += b'{"commit": true, "whole": true}\n{"end": true}\n'
        now = time.time()
        self.call("write", {"all": True}, {"sent": now, "not_after": now + 5, "body": len(body)})
        self.p.stdin.write(body)
        self.p.stdin.flush()
        self.assertIsNone(self.line()["error"])
        self.assertEqual(self.line()["error"]["kind"], "not_dir")
        self.assertEqual(self.line(), {"committed": False, "errors": []})
        self.assertEqual(self.line(), {"done": True})
        self.assertFalse(os.path.exists(good))
        self.assertEqual([n for n in os.listdir(self.tmp.name) if n.endswith(".part")], [])

    def test_unconfirmed_call_never_runs(self):
        # The host gave up on the call (a frozen container) and let the
        # tool go: the input ends where the confirmation would be.
        path = os.path.join(self.tmp.name, "late")
        self.call("mkdir", {"path": path, "mode": 0o755}, True)
        self.assertEqual(self.line(), {"ready": True})
        self.p.stdin.close()
        self.assertEqual(self.p.wait(10), 0)
        self.assertFalse(os.path.exists(path))


class SupervisorSpareTest(unittest.TestCase):
    """agentbox_supervisor.py as a spare: a spec with "confirm" waits for
    the host's b"g"."""

    def start(self, line, path):
        import struct
        import tempfile
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        p = subprocess.Popen([sys.executable, "-I", "-S", "-B", os.path.join(HERE, "agentbox_supervisor.py")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
        self.addCleanup(p.kill)
        spec = json.dumps({"line": line % path, "cwd": tmp.name, "confirm": True}).encode()
        p.stdin.write(struct.pack(">I", len(spec)) + spec)
        p.stdin.flush()
        self.assertEqual(p.stdout.read(5), b"r\0\0\0\0")
        return p

    def test_runs_on_go(self):
        import tempfile
        path = os.path.join(tempfile.mkdtemp(), "ran")
        p = self.start("touch %s", path)
        p.stdin.write(b"g")
        p.stdin.flush()
        kinds = b""
        while not kinds.endswith(b"x"):
            head = p.stdout.read(5)
            self.assertEqual(len(head), 5)
            kinds += head[:1]
            body = p.stdout.read(int.from_bytes(head[1:], "big"))
        self.assertEqual(json.loads(body)["exit_code"], 0)
        self.assertTrue(os.path.exists(path))

    def test_never_runs_unconfirmed(self):
        # The host gave up on the spare (a frozen container) and let it go.
        import tempfile
        path = os.path.join(tempfile.mkdtemp(), "ran")
        p = self.start("touch %s", path)
        p.stdin.close()
        p.wait(10)
        self.assertFalse(os.path.exists(path))


@unittest.skipUnless(os.getuid() == 0, "a launcher drops from root to the sandbox user")
class SupervisorLauncherTest(unittest.TestCase):
    """A spare supervisor forks its command's process ahead (prefork): the
    command runs as it would through subprocess, and a launcher that is
    gone or never used changes nothing."""

    def start(self, line, cwd):
        import struct
        p = subprocess.Popen([sys.executable, "-I", "-S", "-B", "-c",
                              "import sys; sys.path.insert(0, %r); import agentbox_supervisor as s; s.main(ahead=True)" % HERE],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={"PATH": "/usr/bin:/bin", "AGENTBOX_USER": "65534:65534", "AGENTBOX_ENV_GREETING": "hi"})
        self.addCleanup(p.kill)
        spec = json.dumps({"line": line, "cwd": cwd, "confirm": True, "env": {"MINE": "1"}}).encode()
        p.stdin.write(struct.pack(">I", len(spec)) + spec)
        p.stdin.flush()
        self.assertEqual(p.stdout.read(5), b"r\0\0\0\0")
        return p

    def launchers(self, ppid):
        """The live launchers, of the supervisor ppid (None: anyone's)."""
        found = []
        for name in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            rest = stat[stat.rindex(b")") + 2:].split()  # state, ppid, ...
            if b"(agentbox-launch)" in stat and rest[0] != b"Z" and (ppid is None or int(rest[1]) == ppid):
                found.append(int(name))
        return found

    def launcher_of(self, p):
        """The launcher of supervisor p, once it has named itself."""
        import time
        deadline = time.monotonic() + 10
        while not self.launchers(p.pid):
            self.assertLess(time.monotonic(), deadline, "no launcher forked ahead")
            time.sleep(0.01)
        return self.launchers(p.pid)

    def finish(self, p):
        p.stdin.write(b"g")
        p.stdin.flush()
        frames = {}
        while True:
            head = p.stdout.read(5)
            self.assertEqual(len(head), 5)
            body = p.stdout.read(int.from_bytes(head[1:], "big"))
            frames[head[:1]] = frames.get(head[:1], b"") + body
            if head[:1] == b"x":
                return frames, json.loads(body)

    def open_dir(self):
        import tempfile
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        os.chmod(d, 0o755)
        return d

    def test_runs_as_the_user_in_its_own_session(self):
        d = self.open_dir()
        line = 'echo $(id -u) $(id -G | wc -w) $(($$ == $(cut -d" " -f6 /proc/$$/stat))) "$(pwd)" $GREETING $MINE; echo err >&2'
        p = self.start(line, d)
        self.assertEqual(len(self.launcher_of(p)), 1)
        frames, out = self.finish(p)
        self.assertEqual(out["exit_code"], 0, frames)
        self.assertEqual(frames[b"o"].decode().split(), ["65534", "2", "1", d, "hi", "1"])
        self.assertEqual(frames[b"e"], b"err\n")

    def test_signals_as_subprocess_leaves_them(self):
        # The supervisor ignores SIGPIPE; the command must not.
        frames, out = self.finish(self.start("yes | head -c1", self.open_dir()))
        self.assertEqual((out["exit_code"], frames.get(b"o"), frames.get(b"e")), (0, b"y", None))

    def test_folder_refused_to_the_user(self):
        import tempfile
        d = tempfile.mkdtemp()  # 0700, root's
        self.addCleanup(os.rmdir, d)
        p = self.start("true", d)
        _, out = self.finish(p)
        self.assertEqual(out["error"]["op"], "chdir")
        self.assertEqual(out["error"]["errno"], "EACCES")

    def test_launcher_killed_ahead(self):
        # Sandbox code of the same uid may kill it: the command starts the
        # usual way.
        import signal as sig
        p = self.start("echo ran", self.open_dir())
        import time
        for pid in self.launcher_of(p):
            os.kill(pid, sig.SIGKILL)
            deadline = time.monotonic() + 10
            while pid in self.launchers(p.pid):  # a zombie once dead
                self.assertLess(time.monotonic(), deadline, "the killed launcher lives on")
                time.sleep(0.01)
        frames, out = self.finish(p)
        self.assertEqual((out["exit_code"], frames.get(b"o")), (0, b"ran\n"))

    def test_spare_let_go(self):
        p = self.start("true", self.open_dir())
        la = self.launcher_of(p)
        p.stdin.close()
        p.wait(10)
        self.assertEqual([pid for pid in la if pid in self.launchers(None)], [], "a launcher outlived its spare")


class ProbesTest(unittest.TestCase):
    """agentbox_probes.py: the host's short questions."""

    def test_counts_root_supervisors_only(self):
        import tempfile

        import agentbox_probes

        with tempfile.TemporaryDirectory() as d:
            def proc(pid, uid, argv, name=b"x"):
                os.mkdir(os.path.join(d, pid))
                with open(os.path.join(d, pid, "status"), "wb") as f:
                    f.write(b"Name:\t%s\nUid:\t%d\t%d\t%d\t%d\n" % (name, uid, uid, uid, uid))
                with open(os.path.join(d, pid, "cmdline"), "wb") as f:
                    f.write(b"\0".join(argv) + b"\0")

            sup = agentbox_probes.SUPERVISOR.encode()
            proc("10", 0, [b"python3", b"-I", b"-S", b"-B", sup])
            proc("11", 0, [b"python3", b"-I", b"-S", b"-B", sup])
            proc("12", 1000, [b"python3", sup])  # the sandbox user's: not one
            proc("13", 0, [b"python3", b"/opt/agentbox/agentbox_probes.py", b"commands"])
            proc("14", 0, [b"python3", sup + b".bak"])
            os.mkdir(os.path.join(d, "15"))  # gone while looked at
            os.mkdir(os.path.join(d, "self"))
            # Forked by the init (agentbox_tools.py): the init's command
            # line, the tool's name; as the sandbox user, not one.
            init = [b"python3", b"-I", b"-u", b"/opt/agentbox/agentbox_init.py"]
            proc("16", 0, init, name=b"agentbox-cmd")
            proc("17", 1000, init, name=b"agentbox-cmd")
            proc("18", 0, init, name=b"agentbox-files")
            self.assertEqual(agentbox_probes.count_supervisors(d), 3)

    def test_completeness(self):
        import agentbox_probes

        for src, want in [("x = 1", "complete"), ("def f():", "incomplete"), ("(1,", "incomplete"),
                          ("1 +* 2", "invalid"), ("print('\\d')", "complete")]:
            self.assertEqual(agentbox_probes.completeness(src), want, src)

    def test_usage(self):
        import agentbox_probes

        self.assertEqual(agentbox_probes.main(["agentbox_probes.py", "nope"]), 2)


def _add_tests():
    paths = sorted(glob.glob(os.path.join(GOLDEN, "*.jsonl")))
    if not paths:
        raise SystemExit("no transcripts in %s" % GOLDEN)
    for path in paths:
        name = "test_" + os.path.basename(path).replace(".jsonl", "")
        setattr(GoldenTest, name, lambda self, p=path: self.replay(p))


_add_tests()

if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
