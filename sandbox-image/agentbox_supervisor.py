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
# Why a launcher: a fork of this process (a fork of the init, with its
# modules) costs more than the command `true` itself, and subprocess cannot
# use vfork for a child that changes its ids. So a spare forks the
# command's process while it waits (prefork), dropped to the sandbox user
# already; the command then costs an exec.
#
# Protocol. In: a 4-byte big-endian length and a JSON spec; after that, any
# byte or the end of input (the host gave up or was cancelled) kills the
# command. A spec with "confirm" (the host kept this supervisor as a spare
# for the session's next command) is answered by an empty "r" frame, and
# the command starts only after the host's b"g". Out: frames of a one-byte kind, a 4-byte big-endian length and
# the payload: "o" stdout bytes, "e" stderr bytes, "x" the JSON outcome,
# always last ("r" before all, for a spare); after it the supervisor waits (30 s at most) for the host
# to close its input, so that it is still there to be counted (see
# agentbox_probes.py commands) until the host has recorded the outcome. Output beyond max_output per stream (when not 0) keeps its
# head (streamed at once) and tail (sent at the end after a note), like an
# execution's.
import ctypes, errno, json, os, select, selectors, signal, struct, subprocess, sys, threading, time

PR_SET_DUMPABLE, PR_SET_NAME, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 4, 15, 24, 36
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

BOUNDED = False  # the capability bounding set is dropped

def drop_bounding_set(c):
    """Clears this process's capability bounding set, so that nothing the
    command executes can gain a capability, whatever file it runs. The
    supervisor keeps the capabilities it has (the set bounds only what an
    execve may give), and never executes anything itself: so a spare does
    this before its command is known, off the command's path."""
    global BOUNDED
    if BOUNDED or c is None:
        return
    for cap in range(64):
        if c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
    BOUNDED = True

def command_env(spec):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOX_")}
    env["HOME"] = "/session"
    # The session's variables, kept from this root process under a
    # prefix (sandboximage.UserEnvPrefix); the command's own win.
    for k, v in os.environ.items():
        name = k[len(USER_ENV_PREFIX):]
        if k.startswith(USER_ENV_PREFIX) and name and not name.startswith("AGENTBOX_"):
            env[name] = v
    env.update(spec.get("env") or {})
    return env

def failed(step, path, e):
    if isinstance(e, OSError):
        return {"op": step, "path": path, "errno": errno.errorcode.get(e.errno or 0, ""), "message": e.strerror or str(e)}
    return {"op": step, "path": path, "errno": "", "message": repr(e)}

def start(spec, ids, out_w, err_w):
    """Starts the command: bash -c LINE in its own session, as the sandbox
    user (ids) with the marker group only, in spec's cwd; its pid, or the
    failure ({"op", "path", "errno", "message"}) as a dict. The chdir is
    made here, with the user's effective ids, so that a folder the user
    may not enter is refused as it would be to them; the rest is
    subprocess's C child (no Python runs between its fork and the exec,
    which on a virtual machine costs more than the fork), with the
    bounding set already dropped (drop_bounding_set)."""
    drop = ids is not None and os.getuid() == 0 and ids[0] != 0
    cwd = spec["cwd"]
    try:
        if drop:
            os.setegid(ids[1])
            os.seteuid(ids[0])
        try:
            os.chdir(cwd)
        finally:
            if drop:
                os.seteuid(0)
                os.setegid(0)
    except OSError as e:
        return failed("chdir", cwd, e)
    kw = {}
    if drop:
        drop_bounding_set(libc())
        kw = {"user": ids[0], "group": ids[1], "extra_groups": [MARK] if MARK is not None else []}
    try:
        p = subprocess.Popen(["bash", "-c", spec["line"]], executable="/bin/bash", stdin=subprocess.DEVNULL,
                             stdout=out_w, stderr=err_w, env=command_env(spec), close_fds=True,
                             start_new_session=True, **kw)
    except OSError as e:
        # subprocess names the program when the exec failed, and nothing
        # when a step before it did (the setsid, the ids).
        if e.filename == "/bin/bash":
            return failed("start bash", "/bin/bash", e)
        return failed("drop privileges", "", e)
    except BaseException as e:
        return failed("start", "", e)
    # Reaped by the loop's waitpid, not by the Popen object.
    p.returncode = 0
    return p.pid

class Launcher:
    """The command's process, forked by a spare ahead of its command (see
    prefork): its pid, and the supervisor's ends of its pipes."""

    def __init__(self, pid, go_w, fail_r, out_r, err_r, ids):
        self.pid, self.go_w, self.fail_r = pid, go_w, fail_r
        self.out_r, self.err_r, self.ids = out_r, err_r, ids

    used = False  # handed its command: its output pipes are the loop's

    def discard(self):
        """Kills the launcher, unused, and reaps it."""
        if self.used:
            return
        self.used = True
        for fd in (self.go_w, self.fail_r, self.out_r, self.err_r):
            if fd != -1:
                os.close(fd)
        try:
            os.kill(self.pid, signal.SIGKILL)  # it may be stopped
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def prefork(ids, c):
    """Forks the command's process while the spare waits for its command,
    so that the command pays for no fork of this (large) process: the
    child takes its own session, the marker group only and the sandbox
    user's ids (ids), which is all subprocess's child does before its exec,
    and waits for the command's line, folder and environment (launch).
    Having changed its ids it is not dumpable, as a files tool is not, so
    code of the same uid can neither trace it nor open its pipes; it can
    signal it, as it can the command itself. A Launcher, or None when the
    fork failed (the command then starts the usual way)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    go_r, go_w = os.pipe()
    fail_r, fail_w = os.pipe()  # close-on-exec: its end is the exec
    try:
        pid = os.fork()
    except OSError:
        for fd in (out_r, out_w, err_r, err_w, go_r, go_w, fail_r, fail_w):
            os.close(fd)
        return None
    if pid == 0:
        code = 127
        try:
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            lo = 3  # nothing of the supervisor's: the host's stream above all
            for fd in sorted((go_r, fail_w)):
                os.closerange(lo, fd)
                lo = fd + 1
            os.closerange(lo, 65536)
            if c is not None:
                c.prctl(PR_SET_NAME, ctypes.c_char_p(b"agentbox-launch"), 0, 0, 0)
            os.setsid()
            os.setgroups([MARK] if MARK is not None else [])
            os.setresgid(ids[1], ids[1], ids[1])
            os.setresuid(ids[0], ids[0], ids[0])
            code = launch(go_r, fail_w)
        except BaseException:
            pass
        finally:
            os._exit(code)
    for fd in (out_w, err_w, go_r, fail_w):
        os.close(fd)
    return Launcher(pid, go_w, fail_r, out_r, err_r, ids)


def launch(go, fail):
    """In the launcher: reads its command from go and execs it, as start's
    subprocess would; a step that fails is written to fail as JSON. Its
    exit code, when it did not exec."""
    msg = b""
    while len(msg) <= MAX_SPEC:
        b = os.read(go, 1 << 16)
        if not b:
            break
        msg += b
    if not msg:
        return 0  # the spare was let go
    spec = json.loads(msg)
    try:
        os.chdir(spec["cwd"])
    except OSError as e:
        os.write(fail, json.dumps(failed("chdir", spec["cwd"], e)).encode())
        return 127
    # What subprocess restores for its child (restore_signals).
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execve("/bin/bash", ["bash", "-c", spec["line"]], spec["env"])
    except OSError as e:
        os.write(fail, json.dumps(failed("start bash", "/bin/bash", e)).encode())
    return 127


def start_launched(la, spec):
    """Starts the command on la, a launcher: its pid, the failure as start
    gives it, or None when the launcher is gone (sandbox code of the same
    uid may kill it): the command then starts the usual way."""
    msg = json.dumps({"line": spec["line"], "cwd": spec["cwd"], "env": command_env(spec)}).encode()
    try:
        os.set_blocking(la.go_w, True)
        while msg:
            msg = msg[os.write(la.go_w, msg):]
        os.close(la.go_w)
        la.go_w = -1
    except OSError:
        la.discard()
        return None
    la.used = True
    got = b""
    while True:
        try:
            b = os.read(la.fail_r, 1 << 16)
        except InterruptedError:
            continue
        if not b:
            break
        got += b
    os.close(la.fail_r)
    la.fail_r = -1
    if got:
        try:
            os.waitpid(la.pid, 0)
        except ChildProcessError:
            pass
        return json.loads(got)
    return la.pid


def main(ahead=False):
    """ahead: this supervisor is a spare, started ahead of its command."""
    global MARK
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    c = libc()
    if c is not None:
        c.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        if c.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            # EINVAL is gVisor's answer; the marker group stands in there.
            send(b"x", json.dumps({"error": {"op": "become a subreaper", "message": os.strerror(ctypes.get_errno())}}).encode())
            return
    env_ids = parse_user(os.environ.get("AGENTBOX_USER", ""))
    if env_ids is not None and os.getuid() == 0 and env_ids[0] != 0:
        drop_bounding_set(c)
        os.setgroups([])  # root's own: never what the chdir is checked with
    la = None
    if ahead and env_ids is not None and os.getuid() == 0 and env_ids[0] != 0:
        # High, random, and never a gid of the image's files.
        MARK = 0x7F000000 | int.from_bytes(os.urandom(3), "big")
        la = prefork(env_ids, c)
    try:
        return serve(c, la)
    finally:
        if la is not None:
            la.discard()  # when never given its command


def serve(c, la):
    """Reads the spec, runs the command (on la, the launcher a spare forked
    ahead, when it has one) and reports it."""
    global MARK
    try:
        (n,) = struct.unpack(">I", read_exact(4))
    except EOFError:
        return  # a spare the host let go
    if n > MAX_SPEC:
        raise ValueError("spec too large")
    spec = json.loads(read_exact(n))
    if spec.get("confirm"):
        # A spare, started before its command was known: whether the
        # container runs now is not known either. Say so and wait for the
        # host's b"g"; a command sent to a frozen container, which the host
        # gave up on and let go, reads the end of its input once thawed
        # and never runs.
        send(b"r", b"")
        if os.read(0, 1) != b"g":
            return
    if c is not None:
        # Counted as a running command from here on (agentbox_probes.py);
        # a spare is not one.
        c.prctl(PR_SET_NAME, ctypes.c_char_p(b"agentbox-cmd"), 0, 0, 0)
    ids = parse_user(spec.get("user") or os.environ.get("AGENTBOX_USER", ""))
    if la is not None and la.ids != ids:
        la.discard()  # forked for another user
        la = None
    if la is None and ids is not None and os.getuid() == 0 and ids[0] != 0:
        # High, random, and never a gid of the image's files.
        MARK = 0x7F000000 | int.from_bytes(os.urandom(3), "big")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    signal.set_wakeup_fd(wake_w)
    started = time.monotonic()
    pid = None
    if la is not None:
        pid = start_launched(la, spec)
        if pid is not None:
            out_r, err_r = la.out_r, la.err_r
    if pid is None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = start(spec, ids, out_w, err_w)
        for fd in (out_w, err_w):
            os.close(fd)
    if isinstance(pid, dict):
        send(b"x", json.dumps({"error": pid}).encode())
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
