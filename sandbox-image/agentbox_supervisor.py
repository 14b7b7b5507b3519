# agentbox-shell-supervisor: one shell command, for the host.
# agentbox_supervisor.py runs one shell command for the host, as root (the
# container's few capabilities: SETUID, SETGID, KILL, SETPCAP): the init
# forks it for the host over the session's channel (agentbox_tools.py,
# named agentbox-cmd), or an engine exec runs it as a program. It is installed in the image beside the init
# (sandboximage.SupervisorPath) and uses the standard library only.
#
# Why root: the command runs as the sandbox user, and a supervisor of the
# same uid could be signalled, traced or starved by it, leaving orphans
# nobody kills. As root it is on the host's side of the boundary, like
# PID 1, and CAP_KILL lets it kill every process the command starts.
#
# Why a subreaper, a /proc walk and a marker group, not just the process
# group: a child that calls setsid, or forks twice, leaves the group; as a
# child subreaper the supervisor inherits every such orphan, so "the
# command's processes" are its descendants, and none can escape to PID 1.
# gVisor (Debian's runsc) refuses PR_SET_CHILD_SUBREAPER to exec'd
# processes, so there orphans do reach PID 1; what finds them is the marker:
# the command starts with one supplementary group of its own (a random gid
# no file has), which every process it starts inherits and, lacking
# CAP_SETGID, cannot drop, and which no other process can take on. So a
# process is the command's when it descends from the supervisor or carries
# the marker, under either runtime.
#
# Protocol. In: a 4-byte big-endian length and a JSON spec; after that, any
# byte or the end of input (the host gave up or was cancelled) kills the
# command. Out: frames of a one-byte kind, a 4-byte big-endian length and
# the payload: "o" stdout bytes, "e" stderr bytes, "x" the JSON outcome,
# always last; after it the supervisor waits (30 s at most) for the host
# to close its input, so that it is still there to be counted (see
# agentbox_probes.py commands) until the host has recorded the outcome. Output beyond max_output per stream (when not 0) keeps its
# head (streamed at once) and tail (sent at the end after a note), like an
# execution's.
import ctypes, errno, json, os, select, selectors, signal, struct, sys, threading, time

PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 4, 24, 36
USER_ENV_PREFIX = "AGENTBOX_ENV_"
MAX_SPEC = 4 << 20
READ_SIZE = 64 << 10

def libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None

def read_exact(n):
    buf = b""
    while len(buf) < n:
        b = os.read(0, n - len(buf))
        if not b:
            raise EOFError("input ended")
        buf += b
    return buf

def send(kind, data):
    msg = kind + struct.pack(">I", len(data)) + data
    while msg:
        n = os.write(1, msg)
        msg = msg[n:]

class Capture:
    def __init__(self, name, limit):
        self.name, self.limit = name, limit
        self.head = limit - limit // 2
        self.tail_limit = limit // 2
        self.total = 0
        self.tail = bytearray()
    def feed(self, data):
        if not self.limit:
            self.total += len(data)
            return data
        room = self.head - self.total
        out = data[:max(room, 0)]
        rest = data[len(out):]
        self.total += len(data)
        if rest:
            self.tail += rest
            if len(self.tail) > 2 * self.tail_limit + READ_SIZE:
                del self.tail[:len(self.tail) - self.tail_limit]
        return out
    def finish(self):
        if not self.limit or not self.tail:
            return b"", 0
        tail = bytes(self.tail[-self.tail_limit:]) if self.tail_limit else b""
        cut = self.total - self.head - len(tail)
        if cut <= 0:
            return bytes(self.tail), 0
        note = "\n[agentbox: %d bytes of %s cut here; the cap is %d bytes]\n" % (cut, self.name, self.limit)
        return note.encode() + tail, cut

def proc_table():
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
            rest = stat[stat.rindex(b")") + 2:].split()
            table[int(name)] = (int(rest[1]), rest[0])
        except (OSError, ValueError, IndexError):
            continue
    return table

MARK = None  # the command's supplementary group, when it could be given

def carries_mark(pid):
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith(b"Groups:"):
                    return str(MARK).encode() in line.split()[1:]
    except OSError:
        pass
    return False

def descendants():
    """The live (not zombie) processes below this one or marked as the command's."""
    me, table = os.getpid(), proc_table()
    out = []
    for pid, (ppid, state) in table.items():
        if state == b"Z" or pid == me:
            continue
        p, hops = ppid, 0
        while p in table and p != me and hops < 4096:
            p, hops = table[p][0], hops + 1
        if p == me or (MARK is not None and pid != 1 and carries_mark(pid)):
            out.append(pid)
    return out

def kill_all(sig, pgid):
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
    for pid in descendants():
        try:
            os.kill(pid, sig)
        except OSError:
            pass

def parse_user(spec):
    if not spec:
        return None
    user, _, group = spec.partition(":")
    try:
        uid = int(user)
        gid = uid
    except ValueError:
        import pwd
        pw = pwd.getpwnam(user)
        uid, gid = pw.pw_uid, pw.pw_gid
    if group:
        try:
            gid = int(group)
        except ValueError:
            import grp
            gid = grp.getgrnam(group).gr_gid
    return uid, gid

def child(spec, ids, out_w, err_w, fail_w):
    step, path = "start", ""
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.setsid()
        if ids is not None and os.getuid() == 0 and ids[0] != 0:
            step = "drop privileges"
            c = libc()
            if c is not None:
                for cap in range(64):
                    if c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
                        break
            os.setgroups([MARK] if MARK is not None else [])
            os.setresgid(ids[1], ids[1], ids[1])
            os.setresuid(ids[0], ids[0], ids[0])
            if os.getuid() != ids[0] or os.geteuid() != ids[0]:
                raise OSError(errno.EPERM, "still uid %d" % os.geteuid())
        step, path = "chdir", spec["cwd"]
        os.chdir(path)
        step, path = "start bash", "/bin/bash"
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
        env["HOME"] = "/session"
        # The session's variables, kept from this root process under a
        # prefix (sandboximage.UserEnvPrefix); the command's own win.
        for k, v in os.environ.items():
            name = k[len(USER_ENV_PREFIX):]
            if k.startswith(USER_ENV_PREFIX) and name and not name.startswith("AGENTBOX_"):
                env[name] = v
        env.update(spec.get("env") or {})
        os.execve("/bin/bash", ["bash", "-c", spec["line"]], env)
    except OSError as e:
        msg = {"op": step, "path": path, "errno": errno.errorcode.get(e.errno or 0, ""), "message": e.strerror or str(e)}
        os.write(fail_w, json.dumps(msg).encode())
    except BaseException as e:
        os.write(fail_w, json.dumps({"op": step, "path": path, "errno": "", "message": repr(e)}).encode())
    finally:
        os._exit(127)

def main():
    global MARK
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    c = libc()
    if c is not None:
        c.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        if c.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            # EINVAL is gVisor's answer; the marker group stands in there.
            send(b"x", json.dumps({"error": {"op": "become a subreaper", "message": os.strerror(ctypes.get_errno())}}).encode())
            return
    (n,) = struct.unpack(">I", read_exact(4))
    if n > MAX_SPEC:
        raise ValueError("spec too large")
    spec = json.loads(read_exact(n))
    ids = parse_user(spec.get("user") or os.environ.get("AGENTBOX_USER", ""))
    if ids is not None and os.getuid() == 0 and ids[0] != 0:
        # High, random, and never a gid of the image's files.
        MARK = 0x7F000000 | int.from_bytes(os.urandom(3), "big")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    fail_r, fail_w = os.pipe()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    signal.set_wakeup_fd(wake_w)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(spec, ids, out_w, err_w, fail_w)
    for fd in (out_w, err_w, fail_w):
        os.close(fd)
    failure = b""
    while True:
        b = os.read(fail_r, 65536)
        if not b:
            break
        failure += b
    os.close(fail_r)
    if failure:
        os.waitpid(pid, 0)
        send(b"x", json.dumps({"error": json.loads(failure)}).encode())
        return

    state = {"reason": "", "done": False}
    stop = threading.Event()
    grace = float(spec.get("grace", 2))
    timeout = float(spec.get("timeout", 0))

    def killer():
        fired = not stop.wait(timeout if timeout > 0 else None)
        if state["done"]:
            return
        if fired:
            state["reason"] = state["reason"] or "timeout"
        kill_all(signal.SIGTERM, pid)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and descendants():
            time.sleep(0.05)
        while descendants():
            kill_all(signal.SIGKILL, pid)
            time.sleep(0.01)

    threading.Thread(target=killer, daemon=True).start()

    limit = int(spec.get("max_output", 0))
    caps = {out_r: Capture("stdout", limit), err_r: Capture("stderr", limit)}
    kinds = {out_r: b"o", err_r: b"e"}
    sel = selectors.DefaultSelector()
    for fd in (out_r, err_r, wake_r, 0):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    host = True
    status = None
    open_fds = {out_r, err_r}

    def emit(kind, data):
        nonlocal host
        if not data or not host:
            return
        try:
            os.set_blocking(1, True)
            send(kind, data)
        except OSError:
            host = False
            state["reason"] = state["reason"] or "interrupted"
            stop.set()

    linger = None
    while open_fds or status is None:
        wait = None
        if status is not None:
            # Only a process outside the command (handed the pipes) can
            # hold them now: stop waiting soon.
            linger = linger or time.monotonic() + 2
            wait = linger - time.monotonic()
            if wait <= 0:
                break
        for key, _ in sel.select(wait):
            fd = key.fd
            if fd == wake_r:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                while True:
                    try:
                        p, st = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if p == 0:
                        break
                    if p == pid:
                        status = st
                        # The command is over: whatever it left running is
                        # killed, not orphaned.
                        kill_all(signal.SIGKILL, pid)
                continue
            try:
                data = os.read(fd, READ_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if fd == 0:
                sel.unregister(0)
                state["reason"] = state["reason"] or "interrupted"
                stop.set()
                continue
            if not data:
                sel.unregister(fd)
                open_fds.discard(fd)
                continue
            emit(kinds[fd], caps[fd].feed(data))
        if status is not None and open_fds:
            # Killed leftovers may hold the pipes a moment longer.
            kill_all(signal.SIGKILL, pid)
    while descendants():
        kill_all(signal.SIGKILL, pid)
        time.sleep(0.01)
    state["done"] = True
    stop.set()
    duration = time.monotonic() - started
    cut = {}
    for fd in (out_r, err_r):
        tail, n = caps[fd].finish()
        emit(kinds[fd], tail)
        if n:
            cut[caps[fd].name] = n
    outcome = {"duration": duration, "reason": state["reason"], "truncated": cut}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        outcome["exit_code"] = 128 + sig
        try:
            outcome["signal"] = signal.Signals(sig).name
        except ValueError:
            outcome["signal"] = "signal %d" % sig
    else:
        outcome["exit_code"] = os.WEXITSTATUS(status)
    emit(b"x", json.dumps(outcome).encode())
    # Stay (every process of the command is gone) until the host has
    # recorded the outcome and closes the stream: until then another
    # manager's sweep, which counts supervisors, sees the session busy.
    if host:
        try:
            sel.unregister(0)
        except (KeyError, ValueError):
            pass
        try:
            os.set_blocking(0, True)
            r, _, _ = select.select([0], [], [], 30)
            if r:
                os.read(0, 1)
        except OSError:
            pass

if __name__ == "__main__":
    main()
